// Package netguard is the daemon's one door to the network, the way every
// file goes through fsops and every process through sandbox: every part of
// the daemon that reaches out on a client's behalf uses its Client (the
// gateway's http.request and http.download, a tool site's curl, the
// extensions' http module), Vet (a URL another fetcher loads: the
// browser's) or Dial (a checked connection to a host and port: the
// browser's proxy, the extensions' postgres module). The one other dialer,
// previews, reaches only ports the workspace's own processes listen on;
// docs/architecture.md lists every file that dials, and TestDoorsAllowlist
// holds that list to the code.
//
// A request is checked twice. Before anything is resolved, the URL: only
// http and https, an allowed port (80 and 443 by default), no host named
// localhost, *.localhost, *.local or *.internal (metadata.google.internal
// among them), and no IPv4 literal in a non-canonical form (decimal
// 2130706433, octal 0177.0.0.1, hex 0x7f.1, short 127.1), which resolvers
// read as addresses a plain check would not recognise. Then the addresses:
// the Client resolves the name itself, checks every address against the
// special-purpose registries of IANA (loopback, private, link-local with
// the cloud metadata address, CGNAT, multicast, unspecified, documentation,
// IPv4-mapped and NAT64 IPv6; code.dny.dev/ssrf keeps the tables), and dials
// the address it checked, so a second DNS answer (rebinding) is never used.
// The dialer's Control hook checks the connected address once more.
//
// Redirects are followed by hand (3 at most by default), each hop checked
// like the first, with Authorization, Cookie and credentials in the URL
// dropped when the origin changes; a loop is an error. No proxy is taken
// from the environment. Response bodies are cut at a cap (10 MB by default)
// and the Result says so; a response's header past 1 MiB (1xx responses
// counted in) is an error; every request has a timeout (30 s by default).
//
// Two entry points serve a caller other than the Client: Vet applies the
// URL and address rules to a URL and returns the addresses that passed,
// without fetching (the browser provider's request interception); Dial
// connects to a host:port under the port, name and address rules, to an
// address it checked (the browser's CONNECT tunnels, the extensions'
// postgres module). Dial is refused when the operator routes the network
// through a proxy (Options.Proxy, which no flag sets); the Client then
// checks a URL's address before the proxy gets it, and leaves names to the
// proxy's resolution.
//
// The operator (never a client) may loosen it: AllowHosts exempts named
// hosts from the host and address rules (an internal API) but for
// link-local addresses, AllowPrivate lets private and loopback addresses
// through (link-local addresses stay refused), AllowPorts replaces the
// ports, AllowPrefixes admits exact prefixes (tests allow their loopback
// server this way). No option admits a cloud metadata endpoint
// (169.254.169.254, fd00:ec2::254, Alibaba's 100.100.100.200, Azure's
// 168.63.129.16 and the others of metadataAddrs), which sit inside ranges
// the options open (ULA, CGNAT) or in public address space. An address of
// the NAT64 prefix 64:ff9b::/96, which only a prefix admits, must carry an
// IPv4 address the rules admit as well.
package netguard

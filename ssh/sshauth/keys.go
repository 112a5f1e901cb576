package sshauth

import (
	"bufio"
	"bytes"
	"crypto/rsa"
	"fmt"
	"net/netip"
	"path"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/ssh/sshd"
)

// Extension names put in ssh.Permissions for the sessions of a key; the
// SSH core honours them.
const (
	ExtNoPty            = sshd.PermNoPty
	ExtNoPortForwarding = sshd.PermNoPortForwarding
)

// Key is one line of authorized_keys.
type Key struct {
	Key     gossh.PublicKey
	Comment string
	Line    int
	from    []fromPattern // empty: from anywhere
	noPty   bool
	noFwd   bool
}

type fromPattern struct {
	negate bool
	prefix netip.Prefix // when the pattern is a CIDR
	glob   string       // otherwise, matched against the address
}

// ParseAuthorizedKeys reads an OpenSSH authorized_keys file. Options other
// than from=, restrict, no-pty, pty, no-port-forwarding, no-agent-forwarding,
// no-X11-forwarding and no-user-rc are refused with the line, so a key is
// never admitted with a restriction we would silently ignore (command=,
// permitopen=, ...).
func ParseAuthorizedKeys(name string, data []byte) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		pk, comment, options, _, err := gossh.ParseAuthorizedKey(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		if why := weakKey(pk); why != "" {
			return nil, fmt.Errorf("%s:%d: %s", name, n, why)
		}
		k := Key{Key: pk, Comment: comment, Line: n}
		for _, o := range options {
			opt, val, hasVal := strings.Cut(o, "=")
			switch strings.ToLower(opt) {
			case "restrict":
				k.noPty, k.noFwd = true, true
			case "no-pty":
				k.noPty = true
			case "pty":
				k.noPty = false
			case "no-port-forwarding":
				k.noFwd = true
			case "no-agent-forwarding", "no-x11-forwarding", "no-user-rc":
				// Not offered by this server at all.
			case "from":
				if !hasVal {
					return nil, fmt.Errorf("%s:%d: from= needs a pattern list", name, n)
				}
				pats, err := parseFrom(strings.Trim(val, `"`))
				if err != nil {
					return nil, fmt.Errorf("%s:%d: from=%s: %v", name, n, val, err)
				}
				k.from = pats
			default:
				return nil, fmt.Errorf("%s:%d: option %q is not supported here (from=, restrict, no-pty, pty, no-port-forwarding, no-agent-forwarding, no-X11-forwarding, no-user-rc)", name, n, o)
			}
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return keys, nil
}

// minRSABits is the smallest RSA modulus admitted, for a key, a CA key
// and a certificate's key (NIST SP 800-57: 2048 bits).
const minRSABits = 2048

// weakKey says why pk is too weak to admit anyone, or "": a DSA key
// (1024 bits, SHA-1; OpenSSH no longer accepts it) or an RSA key under
// minRSABits. x/crypto's server would verify either.
func weakKey(pk gossh.PublicKey) string {
	if c, ok := pk.(*gossh.Certificate); ok {
		pk = c.Key
	}
	switch pk.Type() {
	case "ssh-dss": // x/crypto's deprecated InsecureKeyAlgoDSA
		return "an ssh-dss (DSA) key is too weak to admit anyone; use ssh-ed25519, ecdsa or RSA of 2048 bits or more"
	case gossh.KeyAlgoRSA:
		if cpk, ok := pk.(gossh.CryptoPublicKey); ok {
			if rk, ok := cpk.CryptoPublicKey().(*rsa.PublicKey); ok && rk.N.BitLen() < minRSABits {
				return fmt.Sprintf("an RSA key of %d bits is too weak to admit anyone (at least %d)", rk.N.BitLen(), minRSABits)
			}
		}
	}
	return ""
}

// parseFrom reads an OpenSSH pattern list: addresses or CIDRs or globs on
// addresses ('*' and '?', as OpenSSH's match_pattern), comma-separated,
// "!" negating. Host names cannot match (the server does no reverse
// lookup), so a pattern with letters is refused, and so is any other
// character an address cannot hold.
func parseFrom(list string) ([]fromPattern, error) {
	var out []fromPattern
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		fp := fromPattern{}
		if strings.HasPrefix(p, "!") {
			fp.negate, p = true, p[1:]
		}
		switch {
		case p == "":
			return nil, fmt.Errorf("an empty pattern")
		case strings.Contains(p, "/"):
			pre, err := netip.ParsePrefix(p)
			if err != nil {
				return nil, err
			}
			if pre != pre.Masked() {
				// OpenSSH refuses such a network (addr_pton_cidr), and the
				// key then logs in from nowhere; masking it would admit a
				// whole network the operator did not write.
				return nil, fmt.Errorf("%q: the address has bits set past its /%d, which OpenSSH refuses; write %s", p, pre.Bits(), pre.Masked())
			}
			fp.prefix = pre
		default:
			if strings.IndexFunc(p, func(r rune) bool { return r >= 'g' && r <= 'z' || r >= 'G' && r <= 'Z' }) >= 0 {
				return nil, fmt.Errorf("%q: host names cannot be matched (no reverse lookups); use addresses or CIDRs", p)
			}
			// Only what an address's text holds, and OpenSSH's two
			// wildcards: path.Match's classes and escapes ("[0-9]", "\\1")
			// mean nothing to OpenSSH, and a space (after "!", say) would
			// make a pattern that matches no address, a restriction
			// silently ignored.
			for _, r := range p {
				if !strings.ContainsRune("0123456789abcdefABCDEF.:*?", r) {
					return nil, fmt.Errorf("%q: %q cannot be in an address pattern (digits, a-f, '.', ':', and the wildcards '*' and '?')", p, r)
				}
			}
			fp.glob = p
		}
		out = append(out, fp)
	}
	return out, nil
}

// allows reports whether the key may be used from addr: some positive
// pattern matches and no negated one does (OpenSSH's rule).
func (k *Key) allows(addr netip.Addr) bool {
	if len(k.from) == 0 {
		return true
	}
	matched := false
	for _, p := range k.from {
		var m bool
		if p.prefix.IsValid() {
			m = p.prefix.Contains(addr)
		} else {
			m, _ = path.Match(p.glob, addr.String())
		}
		if m && p.negate {
			return false
		}
		matched = matched || (m && !p.negate)
	}
	return matched
}

// permissions are what the key's sessions may not do.
func (k *Key) permissions() *gossh.Permissions {
	ext := map[string]string{"pubkey-fp": gossh.FingerprintSHA256(k.Key)}
	if k.noPty {
		ext[ExtNoPty] = "1"
	}
	if k.noFwd {
		ext[ExtNoPortForwarding] = "1"
	}
	return &gossh.Permissions{Extensions: ext}
}

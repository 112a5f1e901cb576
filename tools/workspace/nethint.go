package workspace

import (
	"net/netip"
	"regexp"
	"strings"
	"sync"
)

// A command that fails because its sandbox has no network (the daemon's
// default when it serves its port without a token) prints a resolver or
// socket error that reads like an outage of the remote host; the agent then
// retries, or works around a problem it cannot fix. exec appends one line
// naming the real cause and the setting that changes it, and only when all
// three hold: the command ran without network, it failed, and what it
// printed shows a network failure.

// networkFailures match the messages of the common tools when a name does
// not resolve or no route leads out: glibc and musl (getent, curl, wget,
// ping, ssh), git, npm and Node, pip and Python, Go, and the shell's own
// /dev/tcp; under bwrap a connection finds no route (ENETUNREACH), under
// Landlock it is refused with EACCES. Each is a message a command prints only when it tried the
// network. Compiled on the first failed command that ran without network,
// not at start: a daemon that never sees one never pays for them.
var networkFailures = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)` + strings.Join([]string{
		`temporary failure in name resolution`,
		`name or service not known`,
		`could not resolve host`,
		`could not resolve proxy`,
		`couldn't resolve host`,
		`unable to resolve host`,
		`name resolution failed`,
		`no address associated with hostname`,
		`server misbehaving`,
		`getaddrinfo (enotfound|eai_again)`,
		`\benotfound\b`,
		`\beai_again\b`,
		`\benetunreach\b`,
		`network is unreachable`,
		`connect: permission denied`, // Landlock's refusal of a TCP connect (EACCES)
		`connect eacces`,
		`no route to host`,
		`dial tcp: lookup `,
		`lookup [^ ]+ on [^ ]+: `,
		`newconnectionerror`,
		`failed to establish a new connection`,
	}, "|"))
})

// refusedLine gives the patterns that find "connection refused" lines and
// the addresses such a line names: refused by a loopback address is a local server that is not
// running, not a missing network, so only a line naming other addresses
// (and no loopback one) counts. Compiled on first use, as networkFailures.
var refusedLine = sync.OnceValues(func() (line, ipv4 *regexp.Regexp) {
	return regexp.MustCompile(`(?im)^.*(?:connection refused|econnrefused).*$`),
		regexp.MustCompile(`\b\d{1,3}(?:\.\d{1,3}){3}\b`)
})

// showsNetworkFailure reports whether a failed command's output shows that
// it could not reach the network.
func showsNetworkFailure(out string) bool {
	if networkFailures().MatchString(out) {
		return true
	}
	refused, ipv4 := refusedLine()
	for _, line := range refused.FindAllString(out, -1) {
		addrs := ipv4.FindAllString(line, -1)
		remote := len(addrs) > 0
		for _, a := range addrs {
			if ip, err := netip.ParseAddr(a); err != nil || ip.IsLoopback() || ip.IsUnspecified() {
				remote = false
			}
		}
		if remote {
			return true
		}
	}
	return false
}

// networkNote is the line a failed command's result ends with when it ran
// without network (note, the daemon's explanation, is not empty) and its
// output shows a network failure; "" otherwise.
func networkNote(note, output string) string {
	if note == "" || !showsNetworkFailure(output) {
		return ""
	}
	return note
}

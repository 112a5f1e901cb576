package sshauth

import (
	"bytes"
	"crypto/ed25519"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// fuzzKeyLine is a fixed ed25519 key in authorized_keys form (a fixed seed,
// so the fuzz corpus means the same key on every run).
func fuzzKeyLine(tb testing.TB) string {
	tb.Helper()
	pk, err := gossh.NewPublicKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)).Public())
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pk)))
}

// checkLines is the property both key files share: an error names the file
// and, when it names a line, a line the file has; every key taken is the
// key x/crypto reads on the line it says it came from.
func checkLines(t *testing.T, name string, data []byte, err error, keys []gossh.PublicKey, lines []int) {
	t.Helper()
	fileLines := bytes.Split(data, []byte("\n"))
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, name+":") {
			t.Fatalf("error does not name the file: %v", err)
		}
		rest := strings.TrimPrefix(msg, name+":")
		if num, _, ok := strings.Cut(rest, ":"); ok {
			if n, convErr := strconv.Atoi(num); convErr == nil && (n < 1 || n > len(fileLines)) {
				t.Fatalf("error names line %d of a file of %d lines: %v", n, len(fileLines), err)
			}
		}
		return
	}
	for i, k := range keys {
		n := lines[i]
		if n < 1 || n > len(fileLines) {
			t.Fatalf("key %d from line %d of %d", i, n, len(fileLines))
		}
		pk, _, _, _, perr := gossh.ParseAuthorizedKey(fileLines[n-1])
		if perr != nil || !bytes.Equal(pk.Marshal(), k.Marshal()) {
			t.Fatalf("key %d said to be on line %d (%q), which x/crypto reads as %v, %v", i, n, fileLines[n-1], pk, perr)
		}
	}
}

// FuzzParseAuthorizedKeys: an error names the file and a line it has; each
// key taken is the one x/crypto reads on its line, with no option this
// server would ignore.
func FuzzParseAuthorizedKeys(f *testing.F) {
	key := fuzzKeyLine(f)
	for _, s := range []string{
		"# comment\n\n" + key + " me\n",
		`from="10.0.0.0/8,!10.1.0.0/16,192.168.1.*" ` + key,
		"restrict,pty " + key,
		`command="/bin/true" ` + key,
		"\n\npermitopen=\"x:1\" " + key,
		`from="example.com" ` + key,
		"ssh-ed25519 AAAAnotbase64",
		key + "\r\n" + "no-pty " + key + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		keys, err := ParseAuthorizedKeys("keys", data)
		var pks []gossh.PublicKey
		var lines []int
		for _, k := range keys {
			pks, lines = append(pks, k.Key), append(lines, k.Line)
		}
		checkLines(t, "keys", data, err, pks, lines)
		for _, k := range keys {
			_, _, opts, _, _ := gossh.ParseAuthorizedKey(bytes.Split(data, []byte("\n"))[k.Line-1])
			for _, o := range opts {
				name, _, _ := strings.Cut(strings.ToLower(o), "=")
				switch name {
				case "restrict", "no-pty", "pty", "no-port-forwarding", "no-agent-forwarding", "no-x11-forwarding", "no-user-rc", "from":
				default:
					t.Fatalf("line %d: option %q taken", k.Line, o)
				}
			}
		}
	})
}

// FuzzParseTrustedUserCAKeys: as FuzzParseAuthorizedKeys, and a CA key is
// never a certificate nor carries options.
func FuzzParseTrustedUserCAKeys(f *testing.F) {
	key := fuzzKeyLine(f)
	for _, s := range []string{"# none\n\n", "# c\n" + key + "\nnonsense\n", `from="10.0.0.1" ` + key, "# c\n" + key + "\n\n" + key + "\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cas, err := ParseTrustedUserCAKeys("ca.pub", data)
		if err == nil && len(cas) == 0 {
			t.Fatal("no CA key and no error")
		}
		// The lines the keys came from: the non-blank, non-comment lines in
		// order, each of which was taken.
		var lines []int
		if err == nil {
			for i, l := range bytes.Split(data, []byte("\n")) {
				if l = bytes.TrimSpace(l); len(l) > 0 && l[0] != '#' {
					lines = append(lines, i+1)
				}
			}
			if len(lines) != len(cas) {
				t.Fatalf("%d keys from %d key lines", len(cas), len(lines))
			}
		}
		checkLines(t, "ca.pub", data, err, cas, lines)
		for i, ca := range cas {
			if _, isCert := ca.(*gossh.Certificate); isCert {
				t.Fatalf("key %d is a certificate", i)
			}
			if _, _, opts, _, _ := gossh.ParseAuthorizedKey(bytes.Split(data, []byte("\n"))[lines[i]-1]); len(opts) > 0 {
				t.Fatalf("CA key %d carries options %q", i, opts)
			}
		}
	})
}

// opensshMatch is OpenSSH's match_pattern (match.c): '*' any run of
// characters, '?' any one, everything else itself.
func opensshMatch(s, pat string) bool {
	for len(pat) > 0 {
		switch pat[0] {
		case '*':
			for i := 0; i <= len(s); i++ {
				if opensshMatch(s[i:], pat[1:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
		default:
			if len(s) == 0 || s[0] != pat[0] {
				return false
			}
		}
		s, pat = s[1:], pat[1:]
	}
	return len(s) == 0
}

// opensshFrom is a from= list's verdict for addr as OpenSSH's
// addr_match_list gives it: a CIDR matches the addresses it holds, any
// other pattern by opensshMatch on the address's text; a negated match
// refuses, else some positive match admits.
func opensshFrom(list string, addr netip.Addr) bool {
	matched := false
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		var m bool
		if strings.Contains(p, "/") {
			pre, err := netip.ParsePrefix(p)
			m = err == nil && pre == pre.Masked() && pre.Contains(addr)
		} else {
			m = opensshMatch(addr.String(), p)
		}
		if m && neg {
			return false
		}
		matched = matched || m
	}
	return matched
}

// FuzzFromMatchesOpenSSH: a key taken with a from= list admits exactly the
// addresses OpenSSH's reading of that list admits.
func FuzzFromMatchesOpenSSH(f *testing.F) {
	key := fuzzKeyLine(f)
	for _, c := range []struct{ list, addr string }{
		{"10.0.0.0/8,!10.1.0.0/16,192.168.1.*", "10.1.2.3"},
		{"10.0.0.0/8,!10.1.0.0/16,192.168.1.*", "192.168.1.9"},
		{"10.0.0.0/8,! 10.1.2.3", "10.1.2.3"},
		{"10.0.0.0/8,!10.1.2.[0-9]", "10.1.2.3"},
		{"::1,fe80::/10", "fe80::1"},
		{"1?.0.0.1", "10.0.0.1"},
		{"*", "127.0.0.1"},
		{`10.0.0.\1`, "10.0.0.1"},
	} {
		a := netip.MustParseAddr(c.addr)
		b := a.AsSlice()
		f.Add(c.list, b)
	}
	f.Fuzz(func(t *testing.T, list string, raw []byte) {
		addr, ok := netip.AddrFromSlice(raw)
		if !ok || strings.ContainsAny(list, "\"\n\r") {
			return
		}
		keys, err := ParseAuthorizedKeys("keys", []byte(`from="`+list+`" `+key+"\n"))
		if err != nil {
			return
		}
		if len(keys) != 1 {
			t.Fatalf("%d keys", len(keys))
		}
		if got, want := keys[0].allows(addr), opensshFrom(list, addr); got != want {
			t.Fatalf("from=%q, address %s: admitted %v, OpenSSH's reading %v", list, addr, got, want)
		}
	})
}

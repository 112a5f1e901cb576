package previews

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

func TestTargetAndParsePort(t *testing.T) {
	for _, tc := range []struct {
		host string
		port uint32
		ok   bool
	}{
		{"localhost", 8080, true}, {"LOCALHOST", 1, true}, {"127.0.0.1", 65535, true}, {"::1", 80, true}, {"[::1]", 80, true},
		{"127.0.0.2", 80, false}, {"0.0.0.0", 80, false}, {"10.0.0.1", 80, false}, {"example.com", 80, false},
		{"localhost.", 80, false}, {"", 80, false}, {"::1%lo", 80, false}, {"::ffff:127.0.0.1", 80, false},
		{"localhost", 0, false}, {"localhost", 65536, false}, {"localhost", 1 << 31, false},
	} {
		n, err := Target(tc.host, tc.port)
		if (err == nil) != tc.ok || (tc.ok && n != int(tc.port)) {
			t.Errorf("Target(%q, %d) = %d, %v; ok want %v", tc.host, tc.port, n, err, tc.ok)
		}
	}
	for in, want := range map[string]int{"1": 1, "80": 80, "65535": 65535, "0": 0, "65536": 0, "080": 0, "+80": 0, "8o": 0, "": 0, "123456": 0, "-1": 0} {
		n, err := ParsePort(in)
		if n != want || (want == 0) != (err != nil) {
			t.Errorf("ParsePort(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
}

// FuzzParsePort: a path segment is taken as a port exactly when it is the
// decimal form strconv writes of a number in 1..65535, so each port has
// one spelling (/preview/08080/ and /preview/+8080/ are not 8080).
func FuzzParsePort(f *testing.F) {
	for _, s := range []string{"8080", "1", "65535", "65536", "0", "08080", "+80", "-1", "99999", "", "８０", "80 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParsePort(s)
		want, convErr := strconv.Atoi(s)
		canonical := convErr == nil && strconv.Itoa(want) == s && want >= 1 && want <= 65535
		if (err == nil) != canonical || err == nil && n != want {
			t.Fatalf("ParsePort(%q) = %d, %v; strconv reads %d, %v", s, n, err, want, convErr)
		}
		if err != nil && !errors.Is(err, ErrBadTarget) {
			t.Fatalf("ParsePort(%q): %v is not ErrBadTarget", s, err)
		}
	})
}

// FuzzTarget: a host and port an SSH client names are taken only for a
// port in 1..65535 and a host that is, brackets aside, localhost (any
// case), 127.0.0.1 or ::1, as netip reads them.
func FuzzTarget(f *testing.F) {
	for _, h := range []string{"localhost", "LOCALHOST", "127.0.0.1", "::1", "[::1]", "127.0.0.2", "0:0::1", "::1%lo", "::ffff:127.0.0.1", "localhost.", "[localhost]", "0177.0.0.1"} {
		f.Add(h, uint32(80))
	}
	f.Add("localhost", uint32(0))
	f.Add("localhost", uint32(65536))
	f.Fuzz(func(t *testing.T, host string, port uint32) {
		n, err := Target(host, port)
		if err != nil {
			if !errors.Is(err, ErrBadTarget) {
				t.Fatalf("Target(%q, %d): %v is not ErrBadTarget", host, port, err)
			}
			return
		}
		if n != int(port) || port < 1 || port > 65535 {
			t.Fatalf("Target(%q, %d) = %d", host, port, n)
		}
		h := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		a, perr := netip.ParseAddr(h)
		if !strings.EqualFold(h, "localhost") && (perr != nil || !a.IsLoopback() || a.Zone() != "" || a.Is4In6()) {
			t.Fatalf("Target(%q, %d) taken; not a loopback name or address", host, port)
		}
	})
}

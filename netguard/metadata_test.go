package netguard

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"testing"
)

// TestMetadataRefusedWhateverTheOptions: the cloud metadata endpoints stay
// refused under every loosening an operator has: AllowPrivate (AWS's IPv6
// endpoint is ULA, Alibaba's CGNAT), AllowHosts (metadata.google.internal
// under *.internal, or another exempt name answering with a link-local
// address), AllowPrefixes (a VPN's 100.64.0.0/10) and the strict default
// (Azure's WireServer is public address space). Each is tried through
// Vet, Dial and Fetch; no server is needed, since none is dialled. The
// addresses the options do admit still pass.
func TestMetadataRefusedWhateverTheOptions(t *testing.T) {
	names := stub(map[string]string{
		"aws6.test": "fd00:ec2::254", "alibaba.test": "100.100.100.200", "mapped.test": "::ffff:100.100.100.200",
		"ecs.test": "169.254.170.2", "azure.test": "168.63.129.16", "eks6.test": "fd00:ec2::23",
		"metadata.google.internal": "169.254.169.254", "api.internal": "169.254.10.1", "zone.internal": "fe80::1",
		"private.test": "10.0.0.5", "vpn.test": "100.64.0.7", "ula.test": "fd00::5", "good.internal": "10.1.2.3",
	})
	private := New(Options{AllowPrivate: true, Resolve: names})
	exempt := New(Options{AllowHosts: []string{"*.internal", "aws6.test"}, Resolve: names})
	prefixes := New(Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("168.63.0.0/16")}, Resolve: names})
	strict := New(Options{Resolve: names})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		c    *Client
		urls []string
	}{
		{"AllowPrivate", private, []string{"http://aws6.test/", "http://alibaba.test/", "http://mapped.test/", "http://eks6.test/",
			"http://[fd00:ec2::254]/latest/meta-data/", "http://100.100.100.200/latest/meta-data/", "http://[::ffff:100.100.100.200]/",
			"http://azure.test/", "http://ecs.test/"}},
		{"AllowHosts", exempt, []string{"http://metadata.google.internal/computeMetadata/v1/", "http://api.internal/",
			"http://zone.internal/", "http://aws6.test/"}},
		{"AllowPrefixes", prefixes, []string{"http://alibaba.test/", "http://aws6.test/", "http://[fd00:ec2::254]/", "http://168.63.129.16/"}},
		{"strict", strict, []string{"http://azure.test/", "http://168.63.129.16/machine?comp=goalstate", "http://[::ffff:168.63.129.16]/"}},
	} {
		for _, raw := range tc.urls {
			u, _ := url.Parse(raw)
			if addrs, err := tc.c.Vet(ctx, u); !isBlocked(err) || len(addrs) != 0 {
				t.Errorf("%s: Vet(%s) = %v, %v; want a refusal", tc.name, raw, addrs, err)
			}
			port := u.Port()
			if port == "" {
				port = "80"
			}
			if conn, err := tc.c.Dial(ctx, "tcp", net.JoinHostPort(u.Hostname(), port)); !isBlocked(err) {
				if conn != nil {
					conn.Close()
				}
				t.Errorf("%s: Dial(%s) = %v; want a refusal", tc.name, u.Host, err)
			}
			if _, err := get(t, tc.c, raw); !isBlocked(err) {
				t.Errorf("%s: Fetch(%s) = %v; want a refusal", tc.name, raw, err)
			}
		}
	}
	for _, tc := range []struct {
		name, url string
		c         *Client
	}{
		{"AllowPrivate", "http://private.test/", private},
		{"AllowPrivate", "http://ula.test/", private},
		{"AllowPrivate", "http://vpn.test/", private},
		{"AllowHosts", "http://good.internal/", exempt},
		{"AllowPrefixes", "http://vpn.test/", prefixes},
		{"AllowPrefixes", "http://ula.test/", prefixes},
	} {
		u, _ := url.Parse(tc.url)
		if _, err := tc.c.Vet(ctx, u); err != nil {
			t.Errorf("%s: Vet(%s): %v; want it admitted", tc.name, tc.url, err)
		}
	}
}

// TestNAT64StandsForItsIPv4: an operator on an IPv6-only host admits the
// NAT64 prefix to reach the IPv4 internet; an address of it is then held
// to the rules of the IPv4 address it carries, so the metadata address,
// loopback and private addresses stay refused through it, and a public
// one passes.
func TestNAT64StandsForItsIPv4(t *testing.T) {
	c := New(Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96")}, Resolve: stub(map[string]string{
		"meta.test": "64:ff9b::a9fe:a9fe", "loop.test": "64:ff9b::7f00:1", "private.test": "64:ff9b::a00:5",
		"alibaba.test": "64:ff9b::6464:64c8", "public.test": "64:ff9b::5db8:d822",
	})})
	ctx := context.Background()
	for _, raw := range []string{"http://meta.test/", "http://loop.test/", "http://private.test/", "http://alibaba.test/",
		"http://[64:ff9b::a9fe:a9fe]/latest/meta-data/", "http://[64:ff9b::169.254.169.254]/", "http://[64:ff9b::127.0.0.1]/"} {
		u, _ := url.Parse(raw)
		if addrs, err := c.Vet(ctx, u); !isBlocked(err) {
			t.Errorf("Vet(%s) = %v, %v; want a refusal", raw, addrs, err)
		}
		if conn, err := c.Dial(ctx, "tcp", net.JoinHostPort(u.Hostname(), "80")); !isBlocked(err) {
			if conn != nil {
				conn.Close()
			}
			t.Errorf("Dial(%s): %v; want a refusal", u.Hostname(), err)
		}
	}
	u, _ := url.Parse("http://public.test/")
	if addrs, err := c.Vet(ctx, u); err != nil || len(addrs) != 1 {
		t.Errorf("a public IPv4 address through NAT64: %v, %v; want it admitted", addrs, err)
	}
}

package sshauth

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/admit"
)

// certSourceAddress is the one critical option a user certificate may
// carry: x/crypto's CertChecker enforces it. Any other (force-command,
// verify-required) would be a restriction we cannot honour, so a
// certificate with one is refused, as OpenSSH refuses options it does not
// know.
const certSourceAddress = "source-address"

// ParseTrustedUserCAKeys reads OpenSSH's TrustedUserCAKeys format: one
// public key per line, no options; blank lines and # comments are skipped.
func ParseTrustedUserCAKeys(name string, data []byte) ([]gossh.PublicKey, error) {
	var cas []gossh.PublicKey
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		pk, _, options, _, err := gossh.ParseAuthorizedKey(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		if len(options) > 0 {
			return nil, fmt.Errorf("%s:%d: options (%s) are not allowed on a CA key", name, n, options[0])
		}
		if _, isCert := pk.(*gossh.Certificate); isCert {
			return nil, fmt.Errorf("%s:%d: a certificate, not a CA's public key", name, n)
		}
		if why := weakKey(pk); why != "" {
			return nil, fmt.Errorf("%s:%d: %s", name, n, why)
		}
		cas = append(cas, pk)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("%s: no CA key in the file", name)
	}
	return cas, nil
}

// checkCert admits a user certificate signed by one of cas, valid now,
// that names the login user among its principals, where the login user is
// one of accepted (--ssh-cert-principals), from an address its
// source-address option admits, with no other critical option. A
// certificate without principals is refused, as OpenSSH refuses it (x/crypto
// would take it as valid for every user). A certificate without the
// permit-pty extension gets no pty, and one without permit-port-forwarding
// no direct-tcpip channels (OpenSSH's rules).
func checkCert(conn gossh.ConnMetadata, cert *gossh.Certificate, cas []gossh.PublicKey, accepted map[string]bool) (*gossh.Permissions, error) {
	if len(cas) == 0 {
		return nil, errors.New("certificates are not accepted (no --ssh-trusted-user-ca-keys, or it does not load)")
	}
	if len(cert.ValidPrincipals) == 0 {
		return nil, errors.New("the certificate names no principals (OpenSSH refuses such user certificates too)")
	}
	if why := weakKey(cert.Key); why != "" {
		return nil, errors.New("the certificate's key: " + why)
	}
	if !accepted[conn.User()] {
		return nil, fmt.Errorf("login name %q is not one of --ssh-cert-principals", conn.User())
	}
	checker := gossh.CertChecker{
		IsUserAuthority: func(auth gossh.PublicKey) bool {
			for _, ca := range cas {
				if bytes.Equal(ca.Marshal(), auth.Marshal()) {
					return true
				}
			}
			return false
		},
		SupportedCriticalOptions: []string{certSourceAddress},
	}
	// Authenticate checks the type (a user certificate), the CA, the
	// signature, the validity window, the critical options and that the
	// login name is among the principals.
	if _, err := checker.Authenticate(conn, cert); err != nil {
		return nil, err
	}
	// x/crypto's server enforces source-address only when the returned
	// Permissions carry it; check it here, where the decision is made.
	if v, ok := cert.CriticalOptions[certSourceAddress]; ok && !sourceAddressAdmits(v, admit.ClientAddr(conn.RemoteAddr())) {
		return nil, fmt.Errorf("the certificate's source-address %q does not admit %s", v, conn.RemoteAddr())
	}
	ext := map[string]string{
		"pubkey-fp": gossh.FingerprintSHA256(cert.Key),
		"cert-id":   cert.KeyId,
	}
	if _, ok := cert.Extensions["permit-pty"]; !ok {
		ext[ExtNoPty] = "1"
	}
	if _, ok := cert.Extensions["permit-port-forwarding"]; !ok {
		ext[ExtNoPortForwarding] = "1"
	}
	return &gossh.Permissions{Extensions: ext}, nil
}

// sourceAddressAdmits reports whether a certificate's source-address list
// (addresses and CIDRs, comma-separated) admits addr. As OpenSSH's
// addr_match_cidr_list, a list with an entry it cannot read (empty, not an
// address or a network, or a network with bits set past its mask) admits
// nothing, whatever its other entries.
func sourceAddressAdmits(list string, addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	admits := false
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if p, err := netip.ParsePrefix(e); err == nil {
			if p != p.Masked() {
				return false
			}
			admits = admits || p.Contains(addr)
		} else if a, err := netip.ParseAddr(e); err == nil {
			admits = admits || a.Unmap() == addr
		} else {
			return false
		}
	}
	return admits
}

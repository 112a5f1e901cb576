// Package cafile is --ca, the PEM file of the CA that a client command's
// user names to trust a daemon serving TLS (--tls-cert) with a certificate
// of a private CA or a self-signed one: `agent-backend health`,
// `agent-backend proxy`, and agentbe-bridge's mcp and ssh. It reads the
// file and builds the TLS client configuration that trusts only the
// certificates in it; it imports only the standard library and
// internal/opfile, so the bridge (built for every OS) uses it as the
// daemon's commands do.
package cafile

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"

	"github.com/agentbe/agentbe-daemon/internal/opfile"
)

// Flag is the flag's name in every command that takes the file.
const Flag = "--ca"

// MaxFile bounds the file: a system's whole CA bundle fits.
const MaxFile = 4 << 20

// Config is the TLS client configuration that trusts only the
// certificates of the PEM file path (a CA's certificate, or a self-signed
// server certificate itself), TLS 1.2 or newer; nil, nil for "" (the
// system's roots). An error names the flag, the file and what is wrong:
// no such file, unreadable, or no PEM certificate in it.
func Config(path string) (*tls.Config, error) {
	if path == "" {
		return nil, nil
	}
	// Never a FIFO's wait nor /dev/zero's memory: a regular file, bounded.
	b, err := opfile.ReadRegular(path, MaxFile)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s %s: no such file", Flag, path)
		}
		return nil, fmt.Errorf("%s %s: cannot read: %v", Flag, path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it (want the CA's certificate, a -----BEGIN CERTIFICATE----- block)", Flag, path)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// Untrusted reports whether err is a failure to verify the daemon's
// certificate, which --ca (naming the CA that signed it) answers.
func Untrusted(err error) bool {
	_, ok := errors.AsType[*tls.CertificateVerificationError](err)
	return ok
}

// Explain is err with what to do added when it is a certificate this
// machine does not trust and no --ca was given (path ""): name the CA with
// --ca FILE. Any other err is returned as it is.
func Explain(err error, path string) error {
	if path == "" && Untrusted(err) {
		return fmt.Errorf("%w (a daemon whose certificate this machine does not trust: %s FILE names the CA that signed it)", err, Flag)
	}
	return err
}

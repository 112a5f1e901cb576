package daemon

import (
	"crypto/tls"
	"fmt"
	"sync"

	"github.com/agentbe/agentbe-daemon/internal/opfile"
)

// certReloader holds the serving certificate and swaps it on Reload, so a
// renewed certificate (certbot, cert-manager) is picked up on SIGHUP without
// dropping connections. Handshakes in flight keep the certificate they got.
type certReloader struct {
	certFile, keyFile string

	mu   sync.RWMutex
	cert *tls.Certificate
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// maxPEMFile bounds what --tls-cert and --tls-key may make the daemon read
// (a chain of a few certificates is a few KiB).
const maxPEMFile = 1 << 20

// Reload reads the key pair again, through internal/opfile's reader (a
// regular file, bounded, that only its owner can change: a FIFO or a
// device under either name cannot hang the start or a SIGHUP, and a key
// another user may rewrite is refused). On failure the previous
// certificate stays in use and the error says which files failed.
func (r *certReloader) Reload() error {
	certPEM, err := opfile.Read(r.certFile, maxPEMFile)
	if err != nil {
		return fmt.Errorf("--tls-cert %q / --tls-key %q: --tls-cert: %w", r.certFile, r.keyFile, err)
	}
	keyPEM, err := opfile.Read(r.keyFile, maxPEMFile)
	if err != nil {
		return fmt.Errorf("--tls-cert %q / --tls-key %q: --tls-key: %w", r.certFile, r.keyFile, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("--tls-cert %q / --tls-key %q: %w", r.certFile, r.keyFile, err)
	}
	r.mu.Lock()
	r.cert = &cert
	r.mu.Unlock()
	return nil
}

func (r *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert, nil
}

func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{
		GetCertificate: r.getCertificate,
		MinVersion:     tls.VersionTLS12,
		// HTTP/1.1 only: /ssh is a WebSocket upgrade, which needs it, and
		// MCP requests gain nothing from HTTP/2 on one short exchange.
		NextProtos: []string{"http/1.1"},
	}
}

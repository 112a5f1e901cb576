package cafile

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestConfig: the file's certificate is the one root the configuration
// trusts (here httptest's self-signed certificate, as a daemon's own
// would be), and each bad file is refused naming --ca, the file and what
// is wrong. Explain names --ca after an untrusted certificate's error when
// no --ca was given, and leaves every other error as it is.
func TestConfig(t *testing.T) {
	if c, err := Config(""); c != nil || err != nil {
		t.Errorf(`Config(""): %v, %v; want nil, nil (the system's roots)`, c, err)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.pem")
	empty := filepath.Join(dir, "empty.pem")
	key := filepath.Join(dir, "key.pem")
	for f, b := range map[string][]byte{
		good:  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
		empty: nil,
		key:   pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("not a certificate")}),
	} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	cfg, err := Config(good)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.InsecureSkipVerify {
		t.Errorf("MinVersion %x, InsecureSkipVerify %v", cfg.MinVersion, cfg.InsecureSkipVerify)
	}
	c, err := tls.Dial("tcp", srv.Listener.Addr().String(), cfg)
	if err != nil {
		t.Fatalf("dial with the file's CA: %v", err)
	}
	c.Close()
	_, untrusted := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{MinVersion: tls.VersionTLS12})
	if !Untrusted(untrusted) {
		t.Errorf("dial with the system's roots: %v; want a verification failure", untrusted)
	}
	if got := Explain(untrusted, ""); !Untrusted(got) || !strings.HasSuffix(got.Error(), "x509: certificate signed by unknown authority (a daemon whose certificate this machine does not trust: --ca FILE names the CA that signed it)") {
		t.Errorf("Explain without --ca: %v; want Go's reason, then --ca FILE named", got)
	}
	if got := Explain(untrusted, good); got != untrusted {
		t.Errorf("Explain with --ca: %v; want the error as it is", got)
	}
	if other := errors.New("connection refused"); Explain(other, "") != other || Explain(nil, "") != nil {
		t.Error("Explain changed an error that is not a certificate's")
	}
	if Untrusted(errors.New("connection refused")) || Untrusted(nil) {
		t.Error("Untrusted holds for an error that is not a certificate's")
	}

	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "none.pem"), "--ca " + filepath.Join(dir, "none.pem") + ": no such file"},
		{dir, "--ca " + dir + ": cannot read: not a regular file (a directory)"},
		{empty, "--ca " + empty + ": no PEM certificate in it"},
		{key, "--ca " + key + ": no PEM certificate in it"},
	} {
		if c, err := Config(tc.path); c != nil || err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Config(%s): %v, %v; want an error starting %q", tc.path, c, err, tc.want)
		}
	}
}

// TestConfigNeitherWaitsNorSwallows: --ca naming a FIFO fails at once
// instead of holding the command until someone writes (testenv.FIFO's
// late writer), and a file over MaxFile fails instead of being read
// whole; each error names --ca and the file.
func TestConfigNeitherWaitsNorSwallows(t *testing.T) {
	dir := t.TempDir()
	fifo, big := filepath.Join(dir, "fifo"), filepath.Join(dir, "big.pem")
	testenv.FIFO(t, fifo, "not a certificate\n")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), MaxFile+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{fifo, "--ca " + fifo + ": cannot read: not a regular file (a FIFO)"},
		{big, "--ca " + big + ": cannot read: larger than"},
	} {
		if c, err := Config(tc.path); c != nil || err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Config(%s): %v, %v; want an error starting %q", tc.path, c, err, tc.want)
		}
	}
}

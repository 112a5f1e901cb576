package cafile

import (
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfig: the file's certificate is the one root the configuration
// trusts (here httptest's self-signed certificate, as a daemon's own
// would be), and each bad file is refused naming --ca, the file and what
// is wrong.
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
	if _, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{MinVersion: tls.VersionTLS12}); !Untrusted(err) {
		t.Errorf("dial with the system's roots: %v; want a verification failure", err)
	}
	if Untrusted(errors.New("connection refused")) || Untrusted(nil) {
		t.Error("Untrusted holds for an error that is not a certificate's")
	}

	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "none.pem"), "--ca " + filepath.Join(dir, "none.pem") + ": no such file"},
		{dir, "--ca " + dir + ": cannot read: is a directory"},
		{empty, "--ca " + empty + ": no PEM certificate in it"},
		{key, "--ca " + key + ": no PEM certificate in it"},
	} {
		if c, err := Config(tc.path); c != nil || err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Config(%s): %v, %v; want an error starting %q", tc.path, c, err, tc.want)
		}
	}
}

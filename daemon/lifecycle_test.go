package daemon

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeSystemd listens where $NOTIFY_SOCKET would point and collects messages.
func fakeSystemd(t *testing.T) (socket string, msgs <-chan string) {
	t.Helper()
	socket = filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: socket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan string, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			ch <- string(buf[:n])
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return socket, ch
}

func nextMsg(t *testing.T, msgs <-chan string) string {
	t.Helper()
	select {
	case m := <-msgs:
		return m
	case <-time.After(30 * time.Second): // hang guard
		t.Fatal("no sd_notify message within 30s")
		return ""
	}
}

func TestSdNotifyReadyAndStopping(t *testing.T) {
	socket, msgs := fakeSystemd(t)
	env := map[string]string{"NOTIFY_SOCKET": socket}
	n := NotifierFromEnv(func(k string) string { return env[k] }, os.Getpid())
	if n == nil {
		t.Fatal("no notifier with NOTIFY_SOCKET set")
	}
	c := testConfig(t)
	r := startWith(t, c, Options{Notifier: n})
	ready := nextMsg(t, msgs)
	if !strings.HasPrefix(ready, "READY=1\n") || !strings.Contains(ready, "STATUS=serving http://"+strings.TrimPrefix(r.url, "http://")) {
		t.Fatalf("first message %q; want READY=1 with the address", ready)
	}
	// READY means the port already answers.
	if code, _ := get(t, r.url+"/health"); code != http.StatusOK {
		t.Fatalf("/health after READY=1: %d", code)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if m := nextMsg(t, msgs); m != "STOPPING=1" {
		t.Fatalf("message on shutdown %q; want STOPPING=1", m)
	}
}

func TestSdNotifyWatchdog(t *testing.T) {
	socket, msgs := fakeSystemd(t)
	env := map[string]string{"NOTIFY_SOCKET": socket, "WATCHDOG_USEC": "20000"}
	n := NotifierFromEnv(func(k string) string { return env[k] }, os.Getpid())
	startWith(t, testConfig(t), Options{Notifier: n})
	if m := nextMsg(t, msgs); !strings.HasPrefix(m, "READY=1") {
		t.Fatalf("first message %q", m)
	}
	for i := 0; i < 3; i++ {
		if m := nextMsg(t, msgs); m != "WATCHDOG=1" {
			t.Fatalf("message %q; want WATCHDOG=1", m)
		}
	}
}

func TestNotifierFromEnv(t *testing.T) {
	tests := []struct {
		env      map[string]string
		nilWant  bool
		watchdog time.Duration
	}{
		{map[string]string{}, true, 0},
		{map[string]string{"NOTIFY_SOCKET": "/run/x"}, false, 0},
		{map[string]string{"NOTIFY_SOCKET": "@abstract", "WATCHDOG_USEC": "3000000"}, false, 3 * time.Second},
		{map[string]string{"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}, false, 0}, // another process's watchdog
		{map[string]string{"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "4242"}, false, 3 * time.Second},
		{map[string]string{"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "junk"}, false, 0},
	}
	for _, tt := range tests {
		n := NotifierFromEnv(func(k string) string { return tt.env[k] }, 4242)
		if (n == nil) != tt.nilWant {
			t.Errorf("%v: nil=%v", tt.env, n == nil)
			continue
		}
		if n != nil && n.watchdog != tt.watchdog {
			t.Errorf("%v: watchdog %v; want %v", tt.env, n.watchdog, tt.watchdog)
		}
	}
	// A nil Notifier is usable and silent.
	var none *Notifier
	if err := none.Notify("READY=1"); err != nil {
		t.Errorf("nil Notify: %v", err)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 with the given
// common name and returns the cert and key paths.
func writeCert(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

// servedCN connects to addr and returns the common name of the certificate
// the server presents.
func servedCN(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func TestTLSServesAndReloads(t *testing.T) {
	dir := t.TempDir()
	c := testConfig(t)
	c.TLSCert, c.TLSKey = writeCert(t, dir, "first")
	r := startWith(t, c, Options{})
	addr := strings.TrimPrefix(r.url, "http://")

	pool := x509.NewCertPool()
	pemBytes, _ := os.ReadFile(c.TLSCert)
	pool.AppendCertsFromPEM(pemBytes)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("https://" + addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("https /health: %d", resp.StatusCode)
	}
	// Plain HTTP on a TLS port is refused (Go answers 400 to it).
	if resp, err := http.Get(r.url + "/health"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served on a TLS port")
		}
	}

	if cn := servedCN(t, addr); cn != "first" {
		t.Fatalf("served %q; want first", cn)
	}
	writeCert(t, dir, "second")
	if err := r.d.ReloadTLS(); err != nil {
		t.Fatal(err)
	}
	if cn := servedCN(t, addr); cn != "second" {
		t.Fatalf("after reload served %q; want second", cn)
	}
	// A broken file on reload keeps the previous certificate.
	os.WriteFile(c.TLSKey, []byte("not a key"), 0o600)
	if err := r.d.ReloadTLS(); err == nil || !strings.Contains(err.Error(), "--tls-key") {
		t.Fatalf("reload of a broken key: %v", err)
	}
	if cn := servedCN(t, addr); cn != "second" {
		t.Fatalf("after a failed reload served %q; want second", cn)
	}
}

func TestTLSBadFilesFailAtStart(t *testing.T) {
	c := testConfig(t)
	c.TLSCert, c.TLSKey = filepath.Join(t.TempDir(), "missing.pem"), filepath.Join(t.TempDir(), "missing.key")
	_, err := New(c, Options{})
	if err == nil || !strings.Contains(err.Error(), `--tls-cert "`+c.TLSCert+`"`) {
		t.Fatalf("New with missing cert: %v", err)
	}
}

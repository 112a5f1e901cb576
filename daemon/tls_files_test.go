package daemon

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTLSReloadRefusesUnsafeFiles: on SIGHUP (Reload) a key swapped for a
// FIFO (a plain read would wait for a writer and hold the reload for
// ever), a key file others may write, and a certificate swapped for
// /dev/zero are each refused, naming the flag, and the certificate in
// force stays.
func TestTLSReloadRefusesUnsafeFiles(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir, "first")
	r, err := newCertReloader(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := r.getCertificate(nil)
	keyPEM, _ := os.ReadFile(keyFile)

	reload := func(want string) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- r.Reload() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("reload: %v, want %q", err, want)
			}
		case <-time.After(20 * time.Second):
			// Not a timing assertion: a read that waits on the FIFO
			// never returns.
			t.Fatal("Reload is still reading")
		}
		if now, _ := r.getCertificate(nil); now != before {
			t.Fatal("a failed reload replaced the certificate")
		}
	}

	os.Remove(keyFile)
	if err := syscall.Mkfifo(keyFile, 0o600); err != nil {
		t.Fatal(err)
	}
	reload("--tls-key: not a regular file (a FIFO)")

	os.Remove(keyFile)
	os.WriteFile(keyFile, keyPEM, 0o600)
	os.Chmod(keyFile, 0o666)
	reload("--tls-key: is writable by its group or by others")
	os.Chmod(keyFile, 0o600)

	r.certFile = "/dev/zero"
	reload("--tls-cert: not a regular file (a character device)")
	r.certFile = certFile
	if err := r.Reload(); err != nil {
		t.Fatalf("the files put right: %v", err)
	}
}

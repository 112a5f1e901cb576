package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/internal/testca"
)

// TestSIGHUPWhileStartingIsAReload: a SIGHUP (a logrotate or cert-renewal
// hook) that arrives while the daemon starts, its port bound and its
// providers not yet up, is a reload once the daemon is up, not the
// process's end. The signals are sent from the daemon's first log line
// (its command line read) until it listens.
func TestSIGHUPWhileStartingIsAReload(t *testing.T) {
	port := freePort(t)
	audit := filepath.Join(t.TempDir(), "audit.log")
	cmd := exec.Command(binary, "daemon", "--port", fmt.Sprint(port), "--isolation", "software",
		"--ssh-host-key", filepath.Join(t.TempDir(), "hostkey"), "--root", t.TempDir(), "--audit-log", audit)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	waitFor(t, func() bool { return exited() || strings.Contains(stderr.String(), "level=") })
	sent := 0
	waitFor(t, func() bool {
		if exited() || strings.Contains(stderr.String(), "msg=listening") {
			return true
		}
		if cmd.Process.Signal(syscall.SIGHUP) == nil {
			sent++
		}
		return false
	})
	if exited() {
		t.Fatalf("the daemon ended on a SIGHUP while starting (%d sent): %v\n%s", sent, cmd.ProcessState, stderr)
	}
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "SIGHUP: audit log reopened") })
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatalf("still running 30s after SIGTERM:\n%s", stderr)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit %v after SIGTERM; want 0\n%s", cmd.ProcessState, stderr)
	}
}

// TestSIGHUPWhileShuttingDown: SIGHUPs sent without pause from before a
// SIGTERM until the process is gone neither end it by signal nor cut its
// shutdown short: it exits 0 having logged "stopped". (Process.Signal
// goes through a pidfd: never to another process that got the pid.)
func TestSIGHUPWhileShuttingDown(t *testing.T) {
	audit := filepath.Join(t.TempDir(), "audit.log")
	p := startDaemon(t, "--root", t.TempDir(), "--audit-log", audit)
	stop := make(chan struct{})
	hups := make(chan int)
	go func() {
		n := 0
		defer func() { hups <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if p.cmd.Process.Signal(syscall.SIGHUP) == nil {
				n++
			}
			time.Sleep(20 * time.Microsecond)
		}
	}()
	waitFor(t, func() bool { return strings.Contains(p.stderr.String(), "SIGHUP: audit log reopened") })
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second): // hang guard
		t.Fatalf("still running 30s after SIGTERM:\n%s", p.stderr)
	}
	close(stop)
	n := <-hups
	if st := p.cmd.ProcessState; st.ExitCode() != 0 {
		t.Fatalf("exit %v after SIGTERM with SIGHUPs arriving (%d sent); want 0\n%s", st, n, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), "msg=stopped") {
		t.Errorf("no \"stopped\" in the log:\n%s", p.stderr)
	}
}

// TestSIGHUPStepFailingSkipsNoOther: a SIGHUP that finds the TLS pair
// half replaced (the new certificate, the old key, as a renewal caught
// between its two writes leaves it) logs that once, naming the files, and
// keeps serving the old pair; the token rotation and the audit log's
// reopen of the same SIGHUP still happen, and no log line shows a token.
// The next SIGHUP, the pair whole, serves the new certificate.
func TestSIGHUPStepFailingSkipsNoOther(t *testing.T) {
	const old, next = "sighup-old-token-6Tr2", "sighup-new-token-1Qw9"
	caFile, certFile, keyFile := testca.Files(t)
	_, newCert, newKey := testca.Files(t)
	dir := t.TempDir()
	tokenFile, audit := filepath.Join(dir, "token"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(tokenFile, []byte(old+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startDaemon(t, "--root", t.TempDir(), "--tls-cert", certFile, "--tls-key", keyFile,
		"--auth-token-file", tokenFile, "--audit-log", audit)
	addr := strings.TrimPrefix(p.url, "http://")
	pemOf := func(file string) []byte {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		return blk.Bytes
	}
	served := func() []byte {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Raw
	}
	firstCert := pemOf(certFile)
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(to, b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	hup := func(n int) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return strings.Count(p.stderr.String(), "SIGHUP: audit log reopened") >= n })
	}

	copyFile(newCert, certFile) // the certificate renewed, the key not yet
	tmp := tokenFile + ".new"
	if err := os.WriteFile(tmp, []byte(next+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, tokenFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(audit, audit+".1"); err != nil {
		t.Fatal(err)
	}
	hup(1)
	logs := p.stderr.String()
	if n := strings.Count(logs, "TLS reload failed"); n != 1 || !strings.Contains(logs, certFile) {
		t.Errorf("%d lines say the TLS reload failed, want 1 naming %s:\n%s", n, certFile, logs)
	}
	if !strings.Contains(logs, "SIGHUP: new tokens in force") {
		t.Errorf("the token was not rotated by the SIGHUP whose TLS step failed:\n%s", logs)
	}
	if strings.Contains(logs, old) || strings.Contains(logs, next) {
		t.Errorf("the log shows a token:\n%s", logs)
	}
	if !bytes.Equal(served(), firstCert) {
		t.Error("a half-replaced pair: the daemon does not serve the previous certificate")
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	call := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, "https://"+addr+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"after-reload.txt"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := call(old); code != http.StatusUnauthorized {
		t.Errorf("the old token after the reload: %d, want 401", code)
	}
	if code := call(next); code != http.StatusOK {
		t.Errorf("the new token after the reload: %d, want 200", code)
	}
	waitFor(t, func() bool { b, _ := os.ReadFile(audit); return strings.Contains(string(b), "after-reload.txt") })

	copyFile(newKey, keyFile) // the pair whole again
	hup(2)
	if !bytes.Equal(served(), pemOf(newCert)) {
		t.Errorf("the whole new pair is not served after the next SIGHUP:\n%s", p.stderr)
	}
	if n := strings.Count(p.stderr.String(), "TLS reload failed"); n != 1 {
		t.Errorf("%d TLS failures logged after the second SIGHUP, want the first's only", n)
	}
}

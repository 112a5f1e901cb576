package daemon

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestReloadUnderLoad is SIGHUP's work (cmd/agent-backend's reload: TLS,
// SSH port files, tokens, audit log) run hundreds of times in a row while
// clients work on /mcp (write, read, exec), a held /gateway connection and
// a held /ssh connection, the token file is rewritten in place (truncated,
// then written: a reload may read it empty) with the same token, and the
// audit log is moved away as logrotate does. No call fails, no held
// connection is closed, a reload that read the file empty says so, names
// the file and keeps the token; every audit line is whole JSON, in one
// file or the other, none lost; the daemon holds no more goroutines or
// descriptors after than before.
func TestReloadUnderLoad(t *testing.T) {
	const token = "reload-under-load-token-4Fq8"
	dir := t.TempDir()
	c := testConfig(t)
	c.AuthTokenFile, c.AuthToken = filepath.Join(dir, "token"), token
	must(t, os.WriteFile(c.AuthTokenFile, []byte(token+"\n"), 0o600))
	c.GatewayTools = true
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	must(t, c.Validate())
	r := start(t, c, nil)

	mcp := func(id int, name, args string) error {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args)
		req, err := http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"isError":true`) || strings.Contains(string(b), `"error":{`) {
			return fmt.Errorf("%s: %d %.300s", name, resp.StatusCode, b)
		}
		return nil
	}
	gw := dialGW(t, r.url, token)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"sessionId":"s","toolId":"list_directory","args":{"path":"."}}}`
	gwCall := func() error {
		if err := gw.WriteMessage(websocket.TextMessage, []byte(list)); err != nil {
			return err
		}
		gw.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, b, err := gw.ReadMessage()
		if err != nil {
			return err
		}
		if strings.Contains(string(b), `"error"`) {
			return fmt.Errorf("/gateway: %.300s", b)
		}
		return nil
	}
	ssh := sshAs(t, r.url, token)
	sshCall := func() error {
		s, err := ssh.NewSession()
		if err != nil {
			return err
		}
		defer s.Close()
		if out, err := s.Output("echo via-ssh"); err != nil || string(out) != "via-ssh\n" {
			return fmt.Errorf("/ssh: %q %v", out, err)
		}
		return nil
	}
	// One round of everything first: what the daemon starts on first use
	// is then counted in the baseline.
	must(t, mcp(1, "write_file", `{"path":"warm.txt","content":"x"}`))
	must(t, mcp(2, "exec", `{"command":"true"}`))
	must(t, gwCall())
	must(t, sshCall())
	fdsBefore, goBefore := openFDs(t), runtime.NumGoroutine()

	var calls atomic.Int64 // audited tool calls made
	stop := make(chan struct{})
	var wg sync.WaitGroup
	worker := func(name string, call func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := call(i); err != nil {
					t.Errorf("%s call %d during the reloads: %v", name, i, err)
					return
				}
			}
		}()
	}
	worker("/mcp", func(i int) error {
		p := fmt.Sprintf("w%d.txt", i%8)
		for _, tc := range [][2]string{
			{"write_file", fmt.Sprintf(`{"path":%q,"content":"line %d"}`, p, i)},
			{"read_text_file", fmt.Sprintf(`{"path":%q}`, p)},
			{"exec", `{"command":"echo hi"}`},
		} {
			if err := mcp(i, tc[0], tc[1]); err != nil {
				return err
			}
			calls.Add(1)
		}
		return nil
	})
	worker("/gateway", func(int) error {
		time.Sleep(25 * time.Millisecond) // under the connection's 50 calls a second
		if err := gwCall(); err != nil {
			return err
		}
		calls.Add(1)
		return nil
	})
	worker("/ssh", func(int) error { return sshCall() })
	// The token file rewritten in place, as `echo $T > file` does.
	worker("token file", func(int) error {
		f, err := os.OpenFile(c.AuthTokenFile, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(token + "\n")
		return errorsJoin(err, f.Close())
	})

	// At least 300 reloads, and on until the clients made 150 calls
	// during them.
	reloads, emptyReads := 0, 0
	rotated := []string{c.AuditLog}
	for i := 0; i < 300 || calls.Load() < 150 && i < 20000; i++ {
		reloads++
		if i%60 == 59 { // logrotate: rename, then SIGHUP
			moved := fmt.Sprintf("%s.%d", c.AuditLog, i)
			must(t, os.Rename(c.AuditLog, moved))
			rotated = append(rotated, moved)
		}
		if err := r.d.ReloadTLS(); err != nil {
			t.Fatal(err)
		}
		if err := r.d.ReloadSSHKeys(); err != nil {
			t.Fatal(err)
		}
		if got, err := r.d.ReloadTokens(); err != nil {
			if !strings.Contains(err.Error(), c.AuthTokenFile) || !strings.Contains(err.Error(), "is empty") {
				t.Fatalf("reload %d: %v", i, err)
			}
			if strings.Contains(err.Error(), token) {
				t.Fatalf("the reload's error shows the token: %v", err)
			}
			emptyReads++
		} else if len(got.Rotated) > 0 || got.Ended > 0 {
			t.Fatalf("reload %d of an unchanged token: %+v", i, got)
		}
		if err := r.d.ReopenAuditLog(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reloads, %d read the token file empty, %d audited calls", reloads, emptyReads, calls.Load())

	// The token still admits, on every face.
	must(t, mcp(3, "read_text_file", `{"path":"warm.txt"}`))
	must(t, gwCall())
	must(t, sshCall())

	// Whatever was in flight has ended; then no more goroutines and
	// descriptors than before (a few of slack: the HTTP client's and
	// server's idle connections).
	var fdsAfter, goAfter int
	for range 300 {
		http.DefaultClient.CloseIdleConnections()
		fdsAfter, goAfter = openFDs(t), runtime.NumGoroutine()
		if fdsAfter <= fdsBefore+4 && goAfter <= goBefore+8 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if fdsAfter > fdsBefore+4 || goAfter > goBefore+8 {
		t.Errorf("after %d reloads: %d descriptors (%d before), %d goroutines (%d before)", reloads, fdsAfter, fdsBefore, goAfter, goBefore)
	}

	must(t, r.stop()) // flushes the audit log
	lines := 0
	for _, p := range rotated {
		f, err := os.Open(p)
		must(t, err)
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Errorf("%s: a line that is not whole JSON: %v: %.200q", p, err, sc.Text())
				continue
			}
			if rec["event"] == "audit.dropped" {
				t.Errorf("%s: audit lines dropped: %v", p, rec)
			}
			if rec["tool"] != nil && rec["face"] != "ssh" {
				lines++
			}
		}
		must(t, sc.Err())
		f.Close()
	}
	// Each /mcp and /gateway call made during the reloads has its line,
	// and so have the warm-up's and the last check's (5).
	if want := int(calls.Load()) + 5; lines != want {
		t.Errorf("%d /mcp and /gateway lines in the audit files, want %d", lines, want)
	}
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// openFDs is how many descriptors this process holds.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	must(t, err)
	return len(ents)
}

// TestAuditLogCopytruncate: logrotate's copytruncate (copy the log, then
// truncate it in place, no SIGHUP) leaves the daemon writing at the start
// of the emptied file (it appends, O_APPEND), not past a hole of zeros at
// its old length: the next line is the file's first, whole.
func TestAuditLogCopytruncate(t *testing.T) {
	c := testConfig(t)
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	must(t, c.Validate())
	r := start(t, c, nil)
	call := func(path string) {
		t.Helper()
		if code, body := send(t, http.MethodPost, r.url+"/execute", fmt.Sprintf(`{"tool_name":"read_text_file","arguments":{"path":%q}}`, path), nil); code != http.StatusOK && code != http.StatusNotFound {
			t.Fatalf("/execute: %d %s", code, body)
		}
	}
	read := func() string { b, _ := os.ReadFile(c.AuditLog); return string(b) }
	call("before.txt")
	waitFor(t, "the first line", func() bool { return strings.Contains(read(), "before.txt") })
	must(t, os.Truncate(c.AuditLog, 0))
	call("after.txt")
	waitFor(t, "the line after the truncation", func() bool { return strings.Contains(read(), "after.txt") })
	got := read()
	if strings.Contains(got, "\x00") || strings.Contains(got, "before.txt") || strings.Count(got, "\n") != 1 {
		t.Fatalf("the truncated log holds %q; want the one line of the call after", got)
	}
	var rec map[string]any
	must(t, json.Unmarshal([]byte(got), &rec))
}

package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	token    = "tok-3f9c2b7e1d"
	envValue = "sekrit-env-value-91"
)

// callThrough runs calls through a real registry whose Observe is the log.
func callThrough(t *testing.T, l *Log, calls ...string) {
	t.Helper()
	r := registry.New(registry.Options{Observe: func(rec registry.Record) { l.Write(l.ToolCall(rec)) }})
	err := r.Set("p", []registry.Tool{
		{Name: "exec", InputSchema: map[string]any{"type": "object"}, Handler: func(context.Context, registry.Call) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
		}},
		{Name: "write_file", InputSchema: map[string]any{"type": "object"}, Handler: func(context.Context, registry.Call) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "written"}}}
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range calls {
		name, args, _ := strings.Cut(c, " ")
		if _, err := r.Call(context.Background(), name, registry.Call{Args: json.RawMessage(args), Face: "mcp-http", Remote: "127.0.0.1:5555", Scope: "proj"}); err != nil {
			var u *registry.UnknownToolError
			if !errorsAs(err, &u) {
				t.Fatal(err)
			}
		}
	}
}

func errorsAs(err error, u **registry.UnknownToolError) bool {
	x, ok := err.(*registry.UnknownToolError)
	*u = x
	return ok
}

func TestFileHasNoSecretsAndParses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Options{Path: path, Secrets: clip.NewSecrets(token)})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 10000)
	callThrough(t, l,
		`exec {"command":"curl -H 'Authorization: Bearer `+token+`' http://x","env":{"API_KEY":"`+envValue+`","HOME":"/h"}}`,
		`write_file {"path":"a.txt","content":"`+envValue+long+`"}`,
		`exec {"command":"echo hi","token":"`+envValue+`"}`,
		`nosuchtool {"x":1}`,
	)
	l.Write(Record{Time: time.Now(), Face: "ssh", Tool: "ssh.exec", Command: "TOKEN=" + token + " make", Outcome: "ok"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	for _, secret := range []string{token, envValue} {
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("the audit log contains the secret %q:\n%s", secret, data)
		}
	}
	if bytes.Contains(data, []byte(long[:MaxString+1])) {
		t.Errorf("the audit log holds write_file's content")
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5:\n%s", len(lines), data)
	}
	var got []Record
	for _, ln := range lines {
		var e Record
		if err := json.Unmarshal([]byte(ln), &e); err != nil {
			t.Fatalf("line is not JSON: %v\n%s", err, ln)
		}
		got = append(got, e)
	}
	if e := got[0]; e.Tool != "exec" || e.Face != "mcp-http" || e.Remote != "127.0.0.1:5555" || e.Scope != "proj" || e.Outcome != "ok" || e.BytesIn == 0 || e.BytesOut != 2 {
		t.Errorf("first line: %+v", e)
	}
	if !strings.Contains(string(got[0].Args), `"API_KEY":"[redacted]"`) || !strings.Contains(string(got[0].Args), `"HOME":"[redacted]"`) {
		t.Errorf("env keys not kept with redacted values: %s", got[0].Args)
	}
	if want := fmt.Sprintf(`"content":{"bytes":%d}`, len(envValue)+len(long)); !strings.Contains(string(got[1].Args), want) {
		t.Errorf("write_file content: %s, want %s", got[1].Args, want)
	}
	if got[3].Outcome != "unknown" || got[3].Tool != "nosuchtool" {
		t.Errorf("unknown tool line: %+v", got[3])
	}
	if got[4].Tool != "ssh.exec" || !strings.Contains(got[4].Command, "make") {
		t.Errorf("ssh line: %+v", got[4])
	}
}

func TestRedact(t *testing.T) {
	long := strings.Repeat("y", MaxString+10)
	for _, tt := range []struct{ in, want string }{
		{``, ``},
		{`null`, ``},
		{`{"path":"a"}`, `{"path":"a"}`},
		{`{"env":{"A":"1"}}`, `{"env":{"A":"[redacted]"}}`},
		{`{"env":"A=1"}`, `{"env":"[redacted]"}`},
		{`{"password":"p","nested":{"authToken":"t"}}`, `{"nested":{"authToken":"[redacted]"},"password":"[redacted]"}`},
		{`{"content":"abc"}`, `{"content":{"bytes":3}}`},
		{`{"s":"` + long + `"}`, `{"s":"` + long[:MaxString] + `…[266 bytes]"}`},
		{`[1,2]`, `{"bytes":5,"unparsed":true}`},
		{`{"a":[` + strings.Repeat(`"`+long+`",`, 30) + `1]}`, `{"bytes":` + fmt.Sprint(len(`{"a":[`+strings.Repeat(`"`+long+`",`, 30)+`1]}`)) + `,"truncated":true}`},
	} {
		if got := string(Redact(json.RawMessage(tt.in))); got != tt.want {
			t.Errorf("Redact(%.60s…) = %.200s, want %.200s", tt.in, got, tt.want)
		}
	}
}

func waitFor(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), want) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s never got %q", path, want)
}

func TestReopenAfterRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Write(Record{Tool: "before", Outcome: "ok"})
	waitFor(t, path, `"before"`)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	l.Write(Record{Tool: "between", Outcome: "ok"})
	waitFor(t, path+".1", `"between"`) // still the old file until Reopen
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Write(Record{Tool: "after", Outcome: "ok"})
	waitFor(t, path, `"after"`)
	if b, _ := os.ReadFile(path); strings.Contains(string(b), "before") {
		t.Errorf("new file has old lines: %s", b)
	}
}

// stuck is a writer that blocks until released.
type stuck struct {
	release chan struct{}
	buf     bytes.Buffer
}

func (s *stuck) Write(p []byte) (int, error) {
	<-s.release
	return s.buf.Write(p)
}

func TestFullQueueDropsAndSaysSo(t *testing.T) {
	w := &stuck{release: make(chan struct{})}
	l, err := Open(Options{Path: "-", Stderr: w, Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 100 {
		l.Write(Record{Tool: "t", Outcome: "ok"})
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("writes blocked for %v behind a stuck writer", d)
	}
	if l.Dropped() < 90 {
		t.Errorf("Dropped = %d, want most of 100", l.Dropped())
	}
	close(w.release)
	l.Write(Record{Tool: "last", Outcome: "ok"}) // may be dropped too; the note comes before the next line written
	l.Close()
	if n := strings.Count(w.buf.String(), `"event":"audit.dropped"`); n < 1 {
		t.Errorf("no audit.dropped line:\n%s", w.buf.String())
	}
}

// TestWriteErrorsCountedAndReported: a log whose writes fail (/dev/full
// answers every write with ENOSPC, as a full disk does) counts each lost line
// and tells the daemon's log once for the run, with the path and the errno,
// instead of failing silently.
func TestWriteErrorsCountedAndReported(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Fatalf("this test needs /dev/full (Linux): %v", err)
	}
	var logged syncbuf.Buffer
	l, err := Open(Options{Path: "/dev/full", Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		l.Write(Record{Tool: fmt.Sprintf("t%d", i), Outcome: "ok"})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n := l.WriteErrors(); n != 3 {
		t.Errorf("WriteErrors = %d, want 3", n)
	}
	out := logged.String()
	if strings.Count(out, "audit log: write failed") != 1 {
		t.Errorf("want one report for the run (rate-limited), got:\n%s", out)
	}
	for _, want := range []string{"path=/dev/full", "no space left on device", "lost_total=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestSecretAddedAfterOpen: a token a reload adds to the list is hidden
// from the next record on, in a field and inside the arguments (raw and
// as JSON escapes it), and the old token stays hidden.
func TestSecretAddedAfterOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	secrets := clip.NewSecrets(token)
	l, err := Open(Options{Path: path, Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	const rotated = `rotated"tok`
	l.Write(Record{Time: time.Now(), Face: "ssh", Tool: "ssh.exec", Command: "echo " + token, Outcome: "ok"})
	secrets.Add(rotated)
	l.Write(Record{Time: time.Now(), Face: "ssh", Tool: "ssh.exec", Command: "echo " + rotated + " " + token, Outcome: "ok"})
	callThrough(t, l, `exec {"command":"echo `+strings.ReplaceAll(rotated, `"`, `\"`)+`"}`)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, secret := range []string{token, rotated, `rotated\"tok`, "rotated"} {
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("the audit log contains %q:\n%s", secret, data)
		}
	}
	if n := bytes.Count(data, []byte(Redacted)); n != 4 {
		t.Errorf("%d redactions, want 4:\n%s", n, data)
	}
}

// TestReopenAfterClose: a Reopen after Close (a SIGHUP as the daemon shuts
// down) opens nothing: the log removed meanwhile is not made again, and
// no descriptor is left open that nothing would close.
func TestReopenAfterClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Reopen after Close: %v; want an error saying the log is closed", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("Reopen after Close made the file again: %v", err)
	}
}

// TestReopenOntoFIFOWithoutReader: logrotate's rename, then a FIFO
// nobody reads put under the log's name: Reopen says so at once, naming
// the path, instead of waiting for a reader (which would hold up every
// later SIGHUP step and reload, token rotations among them), and the
// lines go on to the previous file.
func TestReopenOntoFIFOWithoutReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Reopen() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("Reopen onto a FIFO nobody reads: %v; want an error naming it", err)
		}
	case <-time.After(30 * time.Second): // hang guard
		// Open the FIFO for reading so the Reopen returns, then fail.
		if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			<-done
			r.Close()
		}
		t.Fatal("Reopen waits for a reader of the FIFO")
	}
	l.Write(Record{Tool: "after", Outcome: "ok"})
	waitFor(t, path+".1", `"after"`)
}

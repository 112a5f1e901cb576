package procs

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/registry"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	m    *Manager
	reg  *registry.Registry
	ws   fsops.Workspace
	mark string
}

func setup(t *testing.T, mod func(*Options)) *fixture {
	t.Helper()
	ws, err := fsops.NewDir(t.TempDir(), fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	exe, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Executor: exe}
	if mod != nil {
		mod(&opts)
	}
	m := New(opts)
	reg := registry.New(registry.Options{})
	if err := reg.Set("processes", m.Tools()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{m: m, reg: reg, ws: ws, mark: "procs-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
	t.Cleanup(func() {
		m.Close()
		exe.Close()
		ws.Close()
		f.assertNoProcess(t)
	})
	return f
}

// call runs a tool as scope and decodes its JSON result into out.
func (f *fixture) call(t *testing.T, scope, tool, args string, out any) (string, bool) {
	t.Helper()
	ws := f.ws
	if scope != "" {
		s, err := f.ws.Scope(scope)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ws = s
	}
	res, err := f.reg.Call(context.Background(), tool, registry.Call{Args: json.RawMessage(args), Workspace: ws, Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if out != nil && !res.IsError {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			t.Fatalf("%s: %v: %s", tool, err, text)
		}
	}
	return text, res.IsError
}

// assertNoProcess checks /proc for processes carrying this test's mark.
func (f *fixture) assertNoProcess(t *testing.T) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), "PROCS_MARK="+f.mark) {
			t.Errorf("process %s is still there after Close", e.Name())
		}
	}
}

func TestFollowSignalWait(t *testing.T) {
	f := setup(t, nil)
	var in Info
	if txt, isErr := f.call(t, "", "process_start", `{"command":"for i in 1 2 3; do echo line$i; sleep 0.2; done; echo oops >&2; exit 3","name":"counter","env":{"PROCS_MARK":"`+f.mark+`"}}`, &in); isErr || in.ID == "" || in.State != "running" {
		t.Fatalf("start: %s", txt)
	}
	// Follow with a cursor until it exits: every line once, in order.
	var got strings.Builder
	var cur *Cursor
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		args, _ := json.Marshal(map[string]any{"id": in.ID, "since": cur})
		var out Output
		if txt, isErr := f.call(t, "", "process_output", string(args), &out); isErr {
			t.Fatalf("output: %s", txt)
		}
		got.WriteString(out.Stdout)
		c := out.Cursor
		cur = &c
		if out.State == "exited" {
			if *out.ExitCode != 3 || got.String() != "line1\nline2\nline3\n" || out.Truncated {
				t.Fatalf("followed %q, exit %d, truncated %v", got.String(), *out.ExitCode, out.Truncated)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the process did not end")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var out Output
	f.call(t, "", "process_output", `{"id":"`+in.ID+`"}`, &out)
	if out.Stderr != "oops\n" {
		t.Errorf("stderr %q", out.Stderr)
	}
	// A long-running one: listed with its usage, then signalled and waited for.
	var srv Info
	f.call(t, "", "process_start", `{"command":"sleep 30","name":"server","env":{"PROCS_MARK":"`+f.mark+`"}}`, &srv)
	var list struct{ Processes []Info }
	f.call(t, "", "process_list", `{}`, &list)
	if len(list.Processes) != 2 || list.Processes[0].State != "exited" || list.Processes[1].State != "running" || list.Processes[1].Name != "server" {
		t.Fatalf("list: %+v", list.Processes)
	}
	var w Info
	f.call(t, "", "process_wait", `{"id":"`+srv.ID+`","timeoutMs":100}`, &w)
	if w.State != "running" {
		t.Errorf("wait with a short timeout: %+v", w)
	}
	if txt, isErr := f.call(t, "", "process_signal", `{"id":"`+srv.ID+`","signal":"BOGUS"}`, nil); !isErr || !strings.Contains(txt, "use TERM") {
		t.Errorf("a bad signal: %s", txt)
	}
	f.call(t, "", "process_signal", `{"id":"`+srv.ID+`","signal":"TERM"}`, nil)
	f.call(t, "", "process_wait", `{"id":"`+srv.ID+`","timeoutMs":20000}`, &w)
	if w.State != "exited" || w.ExitCode == nil || *w.ExitCode == 0 {
		t.Errorf("after TERM: %+v", w)
	}
	if txt, isErr := f.call(t, "", "process_output", `{"id":"nope"}`, nil); !isErr || !strings.Contains(txt, "no background process") {
		t.Errorf("an unknown id: %s", txt)
	}
}

// TestScopesAndCaps: a scope sees and controls only its own processes; the
// cap refuses a start with a message; the policy applies; Close kills what
// runs (the fixture checks /proc).
func TestScopesAndCaps(t *testing.T) {
	f := setup(t, func(o *Options) { o.MaxProcs = 2; o.BufferBytes = 16 })
	var a, b Info
	if txt, isErr := f.call(t, "users/a", "process_start", `{"command":"sleep 30","env":{"PROCS_MARK":"`+f.mark+`"}}`, &a); isErr {
		t.Fatalf("start in a scope: %s", txt)
	}
	f.call(t, "users/b", "process_start", `{"command":"sleep 30","env":{"PROCS_MARK":"`+f.mark+`"}}`, &b)
	var list struct{ Processes []Info }
	f.call(t, "users/a", "process_list", `{}`, &list)
	if len(list.Processes) != 1 || list.Processes[0].ID != a.ID {
		t.Errorf("scope a sees %+v", list.Processes)
	}
	if txt, isErr := f.call(t, "users/a", "process_kill", `{"id":"`+b.ID+`"}`, nil); !isErr || !strings.Contains(txt, "no background process") {
		t.Errorf("scope a killed scope b's process: %s", txt)
	}
	if txt, isErr := f.call(t, "", "process_start", `{"command":"true"}`, nil); !isErr || !strings.Contains(txt, "2 background processes are running") {
		t.Errorf("over the cap: %s", txt)
	}
	f.call(t, "users/a", "process_kill", `{"id":"`+a.ID+`"}`, nil)
	var w Info
	f.call(t, "users/a", "process_wait", `{"id":"`+a.ID+`","timeoutMs":20000}`, &w)
	if w.State != "exited" {
		t.Fatalf("after kill: %+v", w)
	}
	if txt, isErr := f.call(t, "", "process_start", `{"command":"sudo id"}`, nil); !isErr || !strings.Contains(txt, "privilege-escalation") {
		t.Errorf("the policy: %s", txt)
	}
	if txt, isErr := f.call(t, "", "process_start", `{"command":"pwd","cwd":"../.."}`, nil); !isErr || !strings.Contains(txt, "escape") {
		t.Errorf("a cwd outside: %s", txt)
	}
	// The ring keeps the tail: a small buffer drops the head and says so.
	var long Info
	f.call(t, "", "process_start", `{"command":"echo 0123456789abcdefghijklmnop"}`, &long)
	f.call(t, "", "process_wait", `{"id":"`+long.ID+`","timeoutMs":20000}`, &w)
	var out Output
	f.call(t, "", "process_output", `{"id":"`+long.ID+`","since":{"stdout":0,"stderr":0}}`, &out)
	full := "0123456789abcdefghijklmnop\n"
	if !out.Truncated || out.Stdout != full[len(full)-16:] || out.Cursor.Stdout != int64(len(full)) {
		t.Errorf("ring: %+v", out)
	}
}

func TestRing(t *testing.T) {
	r := newRing(8)
	r.Write([]byte("abc"))
	if s, c, tr := r.read(0, 0); s != "abc" || c != 3 || tr {
		t.Errorf("%q %d %v", s, c, tr)
	}
	r.Write([]byte("defghij"))
	if s, c, tr := r.read(3, 0); s != "defghij" || c != 10 || tr {
		t.Errorf("%q %d %v", s, c, tr)
	}
	if s, _, tr := r.read(0, 0); s != "cdefghij" || !tr {
		t.Errorf("from 0 after the head dropped: %q %v", s, tr)
	}
	if s, _, tr := r.read(0, 3); s != "hij" || tr {
		t.Errorf("tail 3: %q %v", s, tr)
	}
	r.Write([]byte("0123456789"))
	if s, c, _ := r.read(0, 0); s != "23456789" || c != 20 {
		t.Errorf("a write bigger than the ring: %q %d", s, c)
	}
}

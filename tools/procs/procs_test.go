package procs

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
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
	return setupMode(t, sandbox.ModeSoftware, mod)
}

// setupMode is setup with an executor of the given isolation mode.
func setupMode(t *testing.T, mode sandbox.Mode, mod func(*Options)) *fixture {
	t.Helper()
	ws, err := fsops.NewDir(t.TempDir(), fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	exe, err := sandbox.New(sandbox.Config{Mode: mode, WorkspaceRoot: ws.Root()})
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

// TestRingAllocatesAtMostItsSize: fed well over its size in small writes,
// large ones and one bigger than itself, a ring's buffer never has more
// capacity than its nominal size (1 MiB), keeps exactly the tail, and a
// full ring's writes allocate nothing.
func TestRingAllocatesAtMostItsSize(t *testing.T) {
	const size = 1 << 20
	for _, tc := range []struct {
		name   string
		writes []int
	}{
		{"small", repeatInts(100, 15000)},
		{"odd", repeatInts(4093, 400)},
		{"large", repeatInts(300<<10, 6)},
		{"bigger than the ring", []int{10, 3 << 20, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRing(size)
			var all []byte
			for i, n := range tc.writes {
				p := make([]byte, n)
				for j := range p {
					p[j] = byte('a' + (len(all)+j)%23)
				}
				all = append(all, p...)
				r.Write(p)
				if c := cap(r.buf); c > size {
					t.Fatalf("after write %d (%d bytes in all): cap(buf) = %d, over the ring's %d", i, len(all), c, size)
				}
			}
			got, cur, _ := r.read(0, 0)
			if want := string(all[max(len(all)-size, 0):]); got != want || cur != int64(len(all)) {
				t.Fatalf("kept %d bytes (cursor %d); want the last %d of %d", len(got), cur, len(want), len(all))
			}
		})
	}
	r := newRing(size)
	r.Write(make([]byte, size))
	p := make([]byte, 512)
	if a := testing.AllocsPerRun(100, func() { r.Write(p) }); a != 0 {
		t.Errorf("a write to a full ring allocates %v times", a)
	}
}

func repeatInts(n, times int) []int {
	out := make([]int, times)
	for i := range out {
		out[i] = n
	}
	return out
}

// TestRingMatchesReference: random writes and reads at random cursors
// against a plain "keep the last size bytes" model, across the ring's
// growth and wrap.
func TestRingMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{1, 7, 64, 5000, 70000} {
		r := newRing(size)
		var all []byte
		for range 400 {
			n := rng.IntN(size*2 + 3)
			if rng.IntN(4) > 0 {
				n = rng.IntN(size/3 + 2)
			}
			p := make([]byte, n)
			for j := range p {
				p[j] = byte(rng.IntN(256))
			}
			all = append(all, p...)
			r.Write(p)
			start := max(len(all)-size, 0)
			since := int64(rng.IntN(len(all) + 2))
			got, cur, tr := r.read(since, 0)
			from := max(int(min(since, int64(len(all)))), start)
			if got != string(all[from:]) || cur != int64(len(all)) || tr != (since < int64(start)) {
				t.Fatalf("size %d, %d written, since %d: got %d bytes (cursor %d, truncated %v); want %d", size, len(all), since, len(got), cur, tr, len(all)-from)
			}
			tail := rng.IntN(size+2) + 1
			got, _, _ = r.read(0, tail)
			if want := all[max(len(all)-tail, start):]; got != string(want) {
				t.Fatalf("size %d, tail %d: got %d bytes, want %d", size, tail, len(got), len(want))
			}
		}
	}
}

// TestOutputMemoryBounded: a scope whose processes print far more than its
// output bound holds at most the bound (measured by the manager's
// accounting, checked against its rings' real capacity): exited processes'
// output is dropped oldest first (read as truncated, the exit code kept),
// running processes keep theirs, and all scopes together stay under the
// manager's bound.
func TestOutputMemoryBounded(t *testing.T) {
	const buf, scopeMax, totalMax = 64 << 10, 256 << 10, 384 << 10
	f := setup(t, func(o *Options) {
		o.MaxProcs, o.BufferBytes, o.ScopeOutputBytes, o.OutputBytes = 4, buf, scopeMax, totalMax
	})
	held := func(scope string) int64 { // the rings' real capacity
		f.m.mu.Lock()
		defer f.m.mu.Unlock()
		var n int64
		for _, p := range f.m.procs {
			if scope == "*" || p.scope == scope {
				p.stdout.mu.Lock()
				p.stderr.mu.Lock()
				n += int64(cap(p.stdout.buf) + cap(p.stderr.buf))
				p.stderr.mu.Unlock()
				p.stdout.mu.Unlock()
			}
		}
		return n
	}
	check := func(when string) {
		t.Helper()
		for _, scope := range []string{"users/a", "users/b"} {
			if got, real := f.m.OutputBytes(scope), held(scope); got != real || got > scopeMax {
				t.Fatalf("%s: scope %s holds %d bytes (rings: %d); bound %d", when, scope, got, real, scopeMax)
			}
		}
		if got, real := f.m.TotalOutputBytes(), held("*"); got != real || got > totalMax {
			t.Fatalf("%s: all scopes hold %d bytes (rings: %d); bound %d", when, got, real, totalMax)
		}
	}
	printing := `head -c 102400 /dev/zero | tr '\\0' x; head -c 10000 /dev/zero | tr '\\0' y >&2`
	run := func(scope, tail string) Info {
		var in Info
		if txt, isErr := f.call(t, scope, "process_start", `{"command":"`+printing+tail+`","env":{"PROCS_MARK":"`+f.mark+`"}}`, &in); isErr {
			t.Fatalf("start: %s", txt)
		}
		return f.waitOutput(t, scope, in)
	}
	var exited []Info
	for i := range 8 {
		exited = append(exited, run("users/a", ""))
		check(fmt.Sprintf("after exited process %d", i))
	}
	var out Output
	f.call(t, "users/a", "process_output", `{"id":"`+exited[len(exited)-1].ID+`","since":{"stdout":0,"stderr":0}}`, &out)
	if len(out.Stdout) != buf || len(out.Stderr) != 10000 {
		t.Errorf("the newest exited process kept %d+%d bytes; want its %d-byte tail and its stderr", len(out.Stdout), len(out.Stderr), buf)
	}
	f.call(t, "users/a", "process_output", `{"id":"`+exited[0].ID+`","since":{"stdout":0,"stderr":0}}`, &out)
	if out.Stdout != "" || !out.Truncated || out.State != "exited" || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Errorf("the oldest exited process: %+v; want its output dropped (truncated), its exit code kept", out)
	}
	// Running processes keep their output; exited ones make room.
	var running []Info
	for range 3 {
		running = append(running, run("users/a", "; sleep 30"))
		check("with running processes")
	}
	for _, in := range running {
		f.call(t, "users/a", "process_output", `{"id":"`+in.ID+`","tail":1000000}`, &out)
		if len(out.Stdout) != buf || out.State != "running" {
			t.Errorf("running process %s kept %d bytes (%s); want %d", in.ID, len(out.Stdout), out.State, buf)
		}
	}
	// Another scope: the manager's bound holds across both.
	for range 4 {
		run("users/b", "")
		check("with a second scope")
	}
}

// waitOutput waits until in has printed its 100 KiB (and exited, unless it
// sleeps on) and returns it as listed.
func (f *fixture) waitOutput(t *testing.T, scope string, in Info) Info {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard
	for {
		var out Output
		f.call(t, scope, "process_output", `{"id":"`+in.ID+`","tail":1}`, &out)
		if out.Cursor.Stdout == 102400 && out.Cursor.Stderr == 10000 {
			if !strings.Contains(in.Command, "sleep") {
				var w Info
				f.call(t, scope, "process_wait", `{"id":"`+in.ID+`","timeoutMs":20000}`, &w)
				if w.State != "exited" {
					t.Fatalf("%s did not exit: %+v", in.Command, w)
				}
			}
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed %+v", in.Command, out.Cursor)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

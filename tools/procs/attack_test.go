package procs

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// The attack review of background processes (docs/security.md): what a
// client holding a token, scoped or read-only, can make the process tools
// do. Each test says the rule it holds.

// marked returns the pids of processes carrying this test's mark.
func (f *fixture) marked() []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && strings.Contains(string(env), "PROCS_MARK="+f.mark) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

// waitNoMarked waits until no marked process is left (a hang guard, not a
// speed target: a cgroup's kill and its zombies' reaping take a moment).
func (f *fixture) waitNoMarked(t *testing.T, when string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := f.marked()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d marked processes are still there (%v)", when, len(left), left[:min(len(left), 10)])
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (f *fixture) env() string { return `"env":{"PROCS_MARK":"` + f.mark + `"}` }

func (f *fixture) start(t *testing.T, scope, command string) Info {
	t.Helper()
	args, _ := json.Marshal(map[string]any{"command": command, "env": map[string]string{"PROCS_MARK": f.mark}})
	var in Info
	if txt, isErr := f.call(t, scope, "process_start", string(args), &in); isErr {
		t.Fatalf("start %q: %s", command, txt)
	}
	return in
}

func (f *fixture) running() int {
	n := 0
	for _, scope := range []string{"", "users/a", "users/b"} {
		for _, in := range f.m.List(scope) {
			if in.State == "running" {
				n++
			}
		}
	}
	return n
}

// TestAttackCapHoldsUnderConcurrentStarts: the cap on running processes
// holds when many starts arrive at once (each is counted from the moment
// it passed the check, not only once it has started).
func TestAttackCapHoldsUnderConcurrentStarts(t *testing.T) {
	const cap = 2
	f := setup(t, func(o *Options) { o.MaxProcs = cap })
	var wg sync.WaitGroup
	var mu sync.Mutex
	started, refused := 0, 0
	for range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.reg.Call(context.Background(), "process_start", registry.Call{Workspace: f.ws,
				Args: json.RawMessage(`{"command":"sleep 60",` + f.env() + `}`)})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if res.IsError {
				if txt := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(txt, "the most allowed") {
					t.Errorf("a refused start: %s", txt)
				}
				refused++
			} else {
				started++
			}
		}()
	}
	wg.Wait()
	if started != cap || refused != 24-cap || f.running() != cap {
		t.Errorf("24 concurrent starts with MaxProcs %d: %d started, %d refused, %d running", cap, started, refused, f.running())
	}
}

// TestAttackCloseRacingStarts: a start that is under way while the daemon
// shuts down is killed with the rest or refused: Close leaves no process.
func TestAttackCloseRacingStarts(t *testing.T) {
	f := setup(t, func(o *Options) { o.MaxProcs = 64 })
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.reg.Call(context.Background(), "process_start", registry.Call{Workspace: f.ws,
				Args: json.RawMessage(`{"command":"sleep 60",` + f.env() + `}`)})
		}()
	}
	time.Sleep(20 * time.Millisecond) // some starts under way, some done
	f.m.Close()
	wg.Wait()
	f.waitNoMarked(t, "after Close raced 32 starts")
}

// TestAttackTreeAndDaemonsKilled: a process that forks 1000 children, and
// one that leaves its session and double-forks to escape, are killed with
// everything they started by process_kill; a command that daemonizes and
// exits at once leaves nothing running after it.
func TestAttackTreeAndDaemonsKilled(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ModeSoftware, sandbox.ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == sandbox.ModeBwrap {
				testenv.Bwrap(t)
			}
			treeAndDaemonsKilled(t, setupMode(t, mode, nil))
		})
	}
}

func treeAndDaemonsKilled(t *testing.T, f *fixture) {
	many := f.start(t, "", `for i in $(seq 1000); do sleep 600 & done; wait`)
	escaper := f.start(t, "", `setsid sh -c 'sleep 600 &'; (sleep 600 &); nohup sleep 600 >/dev/null 2>&1 & sleep 600`)
	// A hang guard, not a speed target: bash forks its 1000 jobs in 10-20 s
	// on 2 idle cores and much slower on a loaded machine, so the wait goes
	// on while the count grows and gives up after 30 s without a new one.
	seen, grew := 0, time.Now()
	for seen < 1000 && time.Since(grew) < 30*time.Second {
		time.Sleep(200 * time.Millisecond)
		if n := len(f.marked()); n > seen {
			seen, grew = n, time.Now()
		}
	}
	if seen < 1000 {
		t.Fatalf("only %d marked processes came up, none more in the last 30 s", seen)
	}
	for _, in := range []Info{many, escaper} {
		var k Info
		if txt, isErr := f.call(t, "", "process_kill", `{"id":"`+in.ID+`"}`, &k); isErr || k.State != "exited" {
			t.Fatalf("kill %s: %s", in.Command, txt)
		}
	}
	f.waitNoMarked(t, "after process_kill of the trees")
	// Daemonized and gone: the command's end takes what it left.
	d := f.start(t, "", `setsid sh -c 'sleep 600 &' </dev/null >/dev/null 2>&1; (nohup sleep 600 >/dev/null 2>&1 &); exit 0`)
	var w Info
	f.call(t, "", "process_wait", `{"id":"`+d.ID+`","timeoutMs":20000}`, &w)
	if w.State != "exited" || w.ExitCode == nil || *w.ExitCode != 0 {
		t.Fatalf("a daemonizing command: %+v", w)
	}
	f.waitNoMarked(t, "after a daemonizing command exited")
}

// TestAttackGrandchildHoldsOutput: a command that exits while a child it
// left holds its stdout open is seen to exit (the wait does not hang on
// the pipe), and the child is gone with it.
func TestAttackGrandchildHoldsOutput(t *testing.T) {
	f := setup(t, nil)
	in := f.start(t, "", `sleep 600 & echo started; exit 4`)
	var w Info
	f.call(t, "", "process_wait", `{"id":"`+in.ID+`","timeoutMs":30000}`, &w)
	if w.State != "exited" || w.ExitCode == nil || *w.ExitCode != 4 {
		t.Fatalf("a command whose child holds its stdout: %+v", w)
	}
	var out Output
	f.call(t, "", "process_output", `{"id":"`+in.ID+`"}`, &out)
	if out.Stdout != "started\n" {
		t.Errorf("stdout %q", out.Stdout)
	}
	f.waitNoMarked(t, "after the command exited")
}

// TestAttackOutputFlood: output nobody reads, as fast as it comes, without
// a newline (one 100 MiB line), costs at most the ring's bytes and never
// holds the process up; bytes that are not UTF-8, NULs and terminal
// escapes come back inside a valid JSON string, escaped.
func TestAttackOutputFlood(t *testing.T) {
	const buf = 64 << 10
	f := setup(t, func(o *Options) { o.BufferBytes = buf })
	line := f.start(t, "", `head -c 104857600 /dev/zero | tr '\0' x`)
	var w Info
	f.call(t, "", "process_wait", `{"id":"`+line.ID+`","timeoutMs":60000}`, &w)
	if w.State != "exited" || *w.ExitCode != 0 {
		t.Fatalf("a 100 MiB line nobody read: %+v", w)
	}
	var out Output
	f.call(t, "", "process_output", `{"id":"`+line.ID+`","since":{"stdout":0,"stderr":0}}`, &out)
	if out.Cursor.Stdout != 100<<20 || len(out.Stdout) != buf || strings.Trim(out.Stdout, "x") != "" || !out.Truncated {
		t.Errorf("the 100 MiB line: cursor %d, kept %d bytes, truncated %v", out.Cursor.Stdout, len(out.Stdout), out.Truncated)
	}
	// As fast as it can, unread, while it runs: the bound holds.
	flood := f.start(t, "", `yes 'flood flood flood' & yes 'err err' >&2 & wait`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.call(t, "", "process_output", `{"id":"`+flood.ID+`","tail":1}`, &out)
		if out.Cursor.Stdout > 8*buf && out.Cursor.Stderr > 8*buf {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the flood printed only %+v", out.Cursor)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.m.mu.Lock()
	fp := f.m.procs[flood.ID]
	held := fp.held
	f.m.mu.Unlock()
	fp.stdout.mu.Lock()
	real := cap(fp.stdout.buf)
	fp.stdout.mu.Unlock()
	fp.stderr.mu.Lock()
	real += cap(fp.stderr.buf)
	fp.stderr.mu.Unlock()
	if held > 2*buf || int64(real) != held {
		t.Errorf("a flooding process holds %d bytes of output (its rings: %d); at most %d", held, real, 2*buf)
	}
	f.call(t, "", "process_kill", `{"id":"`+flood.ID+`"}`, nil)
	// Not UTF-8, NUL, escapes: a valid JSON answer, control bytes escaped.
	bin := f.start(t, "", `printf 'a\377\376b\000c\033[2J\033]0;title\007d'`)
	f.call(t, "", "process_wait", `{"id":"`+bin.ID+`","timeoutMs":20000}`, nil)
	res, err := f.reg.Call(context.Background(), "process_output", registry.Call{Workspace: f.ws, Args: json.RawMessage(`{"id":"` + bin.ID + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if !json.Valid([]byte(text)) || strings.ContainsAny(text, "\x00\x1b\x07") {
		t.Fatalf("output with control bytes answered %q", text)
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatal(err)
	}
	if out.Stdout != "a\ufffd\ufffdb\x00c\x1b[2J\x1b]0;title\x07d" || out.Cursor.Stdout != 21 {
		t.Errorf("stdout %q (cursor %d)", out.Stdout, out.Cursor.Stdout)
	}
}

// TestAttackStdinIsNull: a background process has no stdin to write to
// (there is no tool for it); a command that reads stdin sees its end at
// once, so nothing of the daemon waits on a reader.
func TestAttackStdinIsNull(t *testing.T) {
	f := setup(t, nil)
	in := f.start(t, "", `cat; read x; echo "read:$?"`)
	var w Info
	f.call(t, "", "process_wait", `{"id":"`+in.ID+`","timeoutMs":20000}`, &w)
	var out Output
	f.call(t, "", "process_output", `{"id":"`+in.ID+`"}`, &out)
	if w.State != "exited" || out.Stdout != "read:1\n" {
		t.Errorf("a command reading stdin: %+v, %q", w, out.Stdout)
	}
}

// TestAttackIdentity: ids are random (not a counter), and another scope's
// id is "not found" to every tool, as an unknown id is; a read-only or
// no-exec token neither starts nor signals nor kills.
func TestAttackIdentity(t *testing.T) {
	f := setup(t, nil)
	a := f.start(t, "users/a", "sleep 60")
	b := f.start(t, "users/a", "sleep 60")
	hex := regexp.MustCompile(`^[0-9a-f]{12}$`)
	if !hex.MatchString(a.ID) || !hex.MatchString(b.ID) || a.ID == b.ID {
		t.Errorf("ids %q %q: want 12 random hex digits", a.ID, b.ID)
	}
	ia, _ := strconv.ParseUint(a.ID, 16, 64)
	ib, _ := strconv.ParseUint(b.ID, 16, 64)
	if ib-ia < 16 || ia-ib < 16 { // two draws of 48 bits this close: 1 in 2^43
		t.Errorf("ids %s and %s are neighbours", a.ID, b.ID)
	}
	for tool, args := range map[string]string{
		"process_output": `{"id":"` + a.ID + `"}`,
		"process_wait":   `{"id":"` + a.ID + `","timeoutMs":1}`,
		"process_signal": `{"id":"` + a.ID + `","signal":"KILL"}`,
		"process_kill":   `{"id":"` + a.ID + `"}`,
	} {
		for _, scope := range []string{"users/b", "users", "users/a/sub", ""} {
			if txt, isErr := f.call(t, scope, tool, args, nil); !isErr || !strings.Contains(txt, "no background process") {
				t.Errorf("%s by scope %q on users/a's process: %s", tool, scope, txt)
			}
		}
	}
	var list struct{ Processes []Info }
	f.call(t, "users/b", "process_list", `{}`, &list)
	if len(list.Processes) != 0 {
		t.Errorf("scope users/b lists %+v", list.Processes)
	}
	for _, who := range []registry.Call{{ReadOnly: true}, {NoExec: true}} {
		for tool, args := range map[string]string{
			"process_start":  `{"command":"true"}`,
			"process_signal": `{"id":"` + a.ID + `","signal":"TERM"}`,
			"process_kill":   `{"id":"` + a.ID + `"}`,
		} {
			s, err := f.ws.Scope("users/a")
			if err != nil {
				t.Fatal(err)
			}
			who.Args, who.Workspace, who.Scope = json.RawMessage(args), s, "users/a"
			res, err := f.reg.Call(context.Background(), tool, who)
			s.Close()
			if err != nil {
				t.Fatal(err)
			}
			if txt := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(txt, "Permission denied") {
				t.Errorf("%s by a read-only %v / no-exec %v caller: %s", tool, who.ReadOnly, who.NoExec, txt)
			}
		}
	}
	if w, _ := f.m.Wait(context.Background(), a.ID, "users/a", time.Millisecond); w.State != "running" {
		t.Errorf("after the refused kills: %+v", w)
	}
}

// TestAttackSignals: only the listed signals, by name; numbers, STOP,
// CONT, 0 and anything else are refused before anything is sent; a signal
// to a process that has exited is sent to nobody (its pid may be another
// process's by now) and answers its final state.
func TestAttackSignals(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ModeSoftware, sandbox.ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == sandbox.ModeBwrap {
				testenv.Bwrap(t)
			}
			signals(t, setupMode(t, mode, nil))
		})
	}
}

func signals(t *testing.T, f *fixture) {
	// TERM reaches the command (under bwrap, which forwards no signal,
	// every process inside).
	term := f.start(t, "", "sleep 60")
	f.call(t, "", "process_signal", `{"id":"`+term.ID+`","signal":"TERM"}`, nil)
	var tw Info
	f.call(t, "", "process_wait", `{"id":"`+term.ID+`","timeoutMs":20000}`, &tw)
	if tw.State != "exited" {
		t.Errorf("after TERM: %+v", tw)
	}
	in := f.start(t, "", "sleep 60")
	for _, sig := range []string{"STOP", "SIGSTOP", "CONT", "TSTP", "0", "9", "-9", "15", "SIGKILL ", "KILL\x00", "TERM,KILL", "", "SEGV", "ALRM", "CHLD", "WINCH"} {
		args, _ := json.Marshal(map[string]string{"id": in.ID, "signal": sig})
		if txt, isErr := f.call(t, "", "process_signal", string(args), nil); !isErr || !strings.Contains(txt, "use TERM") {
			t.Errorf("signal %q: %s", sig, txt)
		}
	}
	if w, _ := f.m.Wait(context.Background(), in.ID, "", time.Millisecond); w.State != "running" {
		t.Errorf("after refused signals: %+v", w)
	}
	f.call(t, "", "process_kill", `{"id":"`+in.ID+`"}`, nil)
	var s Info
	if txt, isErr := f.call(t, "", "process_signal", `{"id":"`+in.ID+`","signal":"TERM"}`, &s); isErr || s.State != "exited" || s.Signal != "KILL" || s.PID != 0 {
		t.Errorf("TERM after the exit: %s", txt)
	}
	// The sandbox's side: once reaped, Signal sends nothing.
	p, err := f.m.opts.Executor.Start(context.Background(), sandbox.Request{Command: "true", Workspace: f.ws}, sandbox.Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	p.Wait()
	if err := p.Signal("KILL"); err == nil {
		t.Error("a signal to a reaped process was sent")
	}
}

// TestAttackSameDoorAsExec: process_start's verdict on a command is exec's
// (the executor's Run, with the same env and cwd): the command policy,
// denied environment variables (LD_PRELOAD, BASH_ENV) dropped, a PATH
// into the workspace judged as exec judges it, a cwd out of the workspace
// or through a planted link refused.
func TestAttackSameDoorAsExec(t *testing.T) {
	f := setup(t, nil)
	root := f.ws.Root()
	outside := t.TempDir()
	os.Mkdir(filepath.Join(root, "bin"), 0o755)
	os.WriteFile(filepath.Join(root, "bin", "ls"), []byte("#!/bin/sh\necho planted\n"), 0o755)
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink("/", filepath.Join(root, "slash"))
	for _, tc := range []struct {
		command string
		env     map[string]string
	}{
		{"sudo id", nil},
		{"echo [$LD_PRELOAD][$BASH_ENV][$PROMPT_COMMAND]", map[string]string{"LD_PRELOAD": "/tmp/x.so", "BASH_ENV": "/tmp/x", "PROMPT_COMMAND": "id"}},
		{"ls", map[string]string{"PATH": root + "/bin"}},
		{"ls", map[string]string{"PATH": "bin:/usr/bin:/bin"}},
		{"sudo id", map[string]string{"PATH": root + "/bin"}},
		{"cat /etc/shadow", nil},
		{"rm -rf /", nil},
		{"bash -c 'su -c id'", nil},
		{"env LD_PRELOAD=/tmp/x.so true", nil},
		{"cd ..; ls", nil},
		{"X=1 true", map[string]string{"A B": "1"}},
	} {
		res, runErr := f.m.opts.Executor.Run(context.Background(), sandbox.Request{Command: tc.command, Env: tc.env, Workspace: f.ws})
		args, _ := json.Marshal(map[string]any{"command": tc.command, "env": tc.env})
		var in Info
		txt, isErr := f.call(t, "", "process_start", string(args), &in)
		if (runErr != nil) != isErr {
			t.Errorf("%q %v: exec says %v, process_start %s", tc.command, tc.env, runErr, txt)
			continue
		}
		if runErr != nil {
			var e *errcode.Error
			if !errors.As(runErr, &e) || !strings.Contains(txt, e.Msg) {
				t.Errorf("%q %v: exec refused with %v, process_start with %s", tc.command, tc.env, runErr, txt)
			}
			continue
		}
		var w Info
		f.call(t, "", "process_wait", `{"id":"`+in.ID+`","timeoutMs":20000}`, &w)
		var out Output
		f.call(t, "", "process_output", `{"id":"`+in.ID+`"}`, &out)
		if out.Stdout != string(res.Stdout) || w.ExitCode == nil || *w.ExitCode != res.ExitCode {
			t.Errorf("%q %v: exec printed %q (exit %d), process_start %q (%+v)", tc.command, tc.env, res.Stdout, res.ExitCode, out.Stdout, w)
		}
	}
	// A cwd is a client path: a link leading out and ".." past the root
	// are refused; an absolute one names a directory of the workspace
	// ("/" its root, "/etc" and the outside directory's name nothing
	// there), never one of the host.
	for _, cwd := range []string{"out", "slash", "slash/etc", "..", "bin/../.."} {
		args, _ := json.Marshal(map[string]any{"command": "pwd", "cwd": cwd})
		if txt, isErr := f.call(t, "", "process_start", string(args), nil); !isErr || !strings.Contains(txt, "escape") {
			t.Errorf("cwd %q: %s", cwd, txt)
		}
	}
	for _, cwd := range []string{"/etc", outside} {
		args, _ := json.Marshal(map[string]any{"command": "pwd", "cwd": cwd})
		if txt, isErr := f.call(t, "", "process_start", string(args), nil); !isErr || !strings.Contains(txt, "no such file") {
			t.Errorf("cwd %q: %s", cwd, txt)
		}
	}
	// With a cwd the process is bound to it (as system.run is), where exec
	// stays bounded by the workspace.
	os.WriteFile(filepath.Join(root, "top.txt"), []byte("top\n"), 0o644)
	if txt, isErr := f.call(t, "", "process_start", `{"command":"cat ../top.txt","cwd":"bin"}`, nil); !isErr || !strings.Contains(txt, "workspace-escape") {
		t.Errorf("../ from cwd bin: %s", txt)
	}
	var in Info
	f.call(t, "", "process_start", `{"command":"pwd","cwd":"/"}`, &in)
	f.call(t, "", "process_wait", `{"id":"`+in.ID+`","timeoutMs":20000}`, nil)
	var out Output
	f.call(t, "", "process_output", `{"id":"`+in.ID+`"}`, &out)
	if out.Stdout != root+"\n" {
		t.Errorf("cwd \"/\" ran in %q; want the workspace's root %s", out.Stdout, root)
	}
}

// TestAttackCloseWithManyRunning: shutdown with 50 processes running (and
// trees below them) kills them all and returns.
func TestAttackCloseWithManyRunning(t *testing.T) {
	f := setup(t, func(o *Options) { o.MaxProcs = 50 })
	before := fds(t)
	for i := range 50 {
		f.start(t, []string{"users/a", "users/b"}[i%2], "sleep 600 & trap '' TERM HUP; sleep 600")
	}
	done := make(chan struct{})
	go func() { f.m.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second): // a hang guard
		t.Fatal("Close with 50 processes running did not return")
	}
	f.waitNoMarked(t, "after Close")
	// A descriptor of the last exits (a process's pidfd or pipe, closed
	// by its Wait goroutine just after Close returns) may still be open
	// for an instant: a leak is one that stays.
	after := fds(t)
	for deadline := time.Now().Add(10 * time.Second); after > before && time.Now().Before(deadline); after = fds(t) {
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		t.Errorf("%d descriptors open before the 50 processes, %d 10 s after Close", before, after)
	}
	if txt, isErr := f.call(t, "users/a", "process_start", `{"command":"true"}`, nil); !isErr || !strings.Contains(txt, "shutting down") {
		t.Errorf("a start after Close: %s", txt)
	}
}

func fds(t *testing.T) int {
	t.Helper()
	e, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(e)
}

// TestAttackOneTokenCannotTakeEverySlot: where --tokens admits several
// tokens, the processes one token started hold at most half of MaxProcs
// (admit.CallerShare), however many start at once, so another token
// still starts its own; with one token it may take them all. A process
// that exits gives its place back to its token.
func TestAttackOneTokenCannotTakeEverySlot(t *testing.T) {
	const max = 4
	f := setup(t, func(o *Options) { o.MaxProcs, o.Tokens = max, true })
	start := func(caller, command string) (Info, string, bool) {
		t.Helper()
		res, err := f.reg.Call(context.Background(), "process_start", registry.Call{Workspace: f.ws, Caller: caller,
			Args: json.RawMessage(`{"command":"` + command + `",` + f.env() + `}`)})
		if err != nil {
			t.Fatal(err)
		}
		txt := res.Content[0].(*mcp.TextContent).Text
		var in Info
		if !res.IsError {
			if err := json.Unmarshal([]byte(txt), &in); err != nil {
				t.Fatal(err)
			}
		}
		return in, txt, res.IsError
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var alice []Info
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in, txt, refused := start("alice", "sleep 60")
			mu.Lock()
			defer mu.Unlock()
			if !refused {
				alice = append(alice, in)
			} else if !strings.Contains(txt, `token "alice" holds 2 of the 4 running background processes, its share`) {
				t.Errorf("alice's refused start: %s", txt)
			}
		}()
	}
	wg.Wait()
	if len(alice) != max/2 {
		t.Fatalf("12 concurrent starts of one token, MaxProcs %d: %d started, want %d", max, len(alice), max/2)
	}
	for _, caller := range []string{"bob", ""} {
		if _, txt, refused := start(caller, "sleep 60"); refused {
			t.Errorf("%q after alice took her share: %s", caller, txt)
		}
	}
	if _, txt, refused := start("carol", "sleep 60"); !refused || !strings.Contains(txt, "4 background processes are running, the most allowed") {
		t.Errorf("the whole cap: %s", txt)
	}
	f.call(t, "", "process_kill", `{"id":"`+alice[0].ID+`"}`, nil)
	f.call(t, "", "process_wait", `{"id":"`+alice[0].ID+`","timeoutMs":20000}`, nil)
	if _, txt, refused := start("alice", "sleep 60"); refused {
		t.Errorf("alice after one of hers exited: %s", txt)
	}

	one := setup(t, func(o *Options) { o.MaxProcs = 2 })
	for i := range 2 {
		res, err := one.reg.Call(context.Background(), "process_start", registry.Call{Workspace: one.ws,
			Args: json.RawMessage(`{"command":"sleep 60",` + one.env() + `}`)})
		if err != nil || res.IsError {
			t.Fatalf("start %d with one token: %v %v", i, err, res.Content)
		}
	}
}

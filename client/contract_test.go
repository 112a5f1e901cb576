package client

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// runContract runs the Backend contract of the specification against a
// fresh backend from mk. canExec says whether the kind runs commands (a
// memory backend answers NOT_IMPLEMENTED, which is checked instead).
func runContract(t *testing.T, mk func(t *testing.T) Backend, canExec bool) {
	runContractMCP(t, mk, canExec, MCPOptions{InProcess: true})
}

// runContractMCP is runContract with the MCP options the lifecycle part
// connects with (a remote backend's MCP is the daemon's /mcp).
func runContractMCP(t *testing.T, mk func(t *testing.T) Backend, canExec bool, mcpOpts MCPOptions) {
	ctx := context.Background()
	fresh := func(t *testing.T) Backend {
		t.Helper()
		b := mk(t)
		t.Cleanup(func() { b.Destroy() })
		return b
	}

	t.Run("files", func(t *testing.T) {
		b := fresh(t)
		if err := b.Write(ctx, "dir/sub/a.txt", []byte("hello")); err != nil {
			t.Fatalf("write creates parents: %v", err)
		}
		for _, p := range []string{"dir/sub/a.txt", "/dir/sub/a.txt", b.RootDir() + "/dir/sub/a.txt", "dir/x/../sub/a.txt"} {
			if got, err := b.Read(ctx, p); err != nil || string(got) != "hello" {
				t.Errorf("read %q: %q %v", p, got, err)
			}
		}
		names, err := b.Readdir(ctx, "dir")
		if err != nil || !slices.Equal(names, []string{"sub"}) {
			t.Errorf("readdir: %v %v", names, err)
		}
		if ok, err := b.Exists(ctx, "dir/sub/a.txt"); !ok || err != nil {
			t.Errorf("exists: %v %v", ok, err)
		}
		if ok, err := b.Exists(ctx, "nope"); ok || err != nil {
			t.Errorf("exists of a missing path: %v %v", ok, err)
		}
		fi, err := b.Stat(ctx, "dir/sub/a.txt")
		if err != nil || fi.Size != 5 || !fi.IsFile() || fi.IsDir() || fi.ModTime.IsZero() {
			t.Errorf("stat: %+v %v", fi, err)
		}
		if err := b.Touch(ctx, "dir/sub/a.txt"); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.Read(ctx, "dir/sub/a.txt"); string(got) != "hello" {
			t.Errorf("touch truncated: %q", got)
		}
		if err := b.Rename(ctx, "dir/sub/a.txt", "dir/b.txt"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Read(ctx, "dir/sub/a.txt"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("read after rename: %v", err)
		}
		if err := b.Mkdir(ctx, "m/n/o", MkdirOptions{Recursive: true}); err != nil {
			t.Fatal(err)
		}
		if err := b.Rm(ctx, "dir", RmOptions{}); err == nil {
			t.Error("rm of a non-empty directory without recursive")
		}
		if err := b.Rm(ctx, "dir", RmOptions{Recursive: true}); err != nil {
			t.Fatal(err)
		}
		if ok, _ := b.Exists(ctx, "dir/b.txt"); ok {
			t.Error("rm recursive left a file")
		}
		if err := b.Rm(ctx, "nope", RmOptions{Force: true}); err != nil {
			t.Errorf("rm force of a missing path: %v", err)
		}
		if err := b.Rm(ctx, "nope", RmOptions{}); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("rm of a missing path: %v", err)
		}
	})

	t.Run("escapes", func(t *testing.T) {
		b := fresh(t)
		for _, op := range []struct {
			name string
			do   func() error
		}{
			{"read", func() error { _, err := b.Read(ctx, "../x"); return err }},
			{"write", func() error { return b.Write(ctx, "a/../../x", []byte("x")) }},
			{"readdir", func() error { _, err := b.Readdir(ctx, ".."); return err }},
			{"mkdir", func() error { return b.Mkdir(ctx, "../m", MkdirOptions{}) }},
			{"stat", func() error { _, err := b.Stat(ctx, "../../etc/passwd"); return err }},
			{"rm", func() error { return b.Rm(ctx, "../x", RmOptions{Force: true}) }},
			{"rename", func() error { return b.Rename(ctx, "a", "../b") }},
			{"touch", func() error { return b.Touch(ctx, "../t") }},
			{"scope", func() error { _, err := b.Scope("../up", ScopeOptions{}); return err }},
		} {
			err := op.do()
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != errcode.PathEscapeAttempt {
				t.Errorf("%s: %v; want PATH_ESCAPE_ATTEMPT", op.name, err)
			} else if op.name != "scope" && !strings.HasPrefix(err.Error(), op.name+" ") {
				t.Errorf("%s: %q does not name the operation", op.name, err)
			}
		}
		// An absolute path outside the root is taken as relative, not refused.
		if err := b.Write(ctx, "/etc/passwd", []byte("inside")); err != nil {
			t.Errorf("absolute path made relative: %v", err)
		}
		if got, _ := b.Read(ctx, "etc/passwd"); string(got) != "inside" {
			t.Errorf("absolute path made relative: read %q", got)
		}
	})

	t.Run("exec", func(t *testing.T) {
		b := fresh(t)
		_, err := b.Exec(ctx, "echo hi", ExecOptions{})
		if !canExec {
			if !errcode.Is(err, errcode.NotImplemented) {
				t.Errorf("exec on a backend without commands: %v; want NOT_IMPLEMENTED", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		out, err := b.Exec(ctx, `echo "$HOME|$(pwd)|$X"`, ExecOptions{Env: map[string]string{"X": "env"}})
		if err != nil || string(out) != b.RootDir()+"|"+b.RootDir()+"|env\n" {
			t.Errorf("exec env, cwd, HOME: %q %v", out, err)
		}
		_, err = b.Exec(ctx, "echo to-stderr >&2; exit 3", ExecOptions{})
		var xe *ExitError
		if !errcode.Is(err, errcode.ExecFailed) || !errors.As(err, &xe) || xe.ExitCode != 3 || !strings.Contains(err.Error(), "to-stderr") {
			t.Errorf("non-zero exit: %v", err)
		}
		// The safety policy: on by default, except in isolation none (the
		// trust mode, where nothing is checked).
		if l, ok := b.(*Local); !ok || func() bool { m, _ := l.Isolation(); return m != "none" }() {
			if _, err := b.Exec(ctx, "sudo id", ExecOptions{}); !errcode.Is(err, errcode.DangerousOperation) {
				t.Errorf("blocked command: %v", err)
			}
		}
		if _, err := b.Exec(ctx, "  ", ExecOptions{}); !errcode.Is(err, errcode.EmptyCommand) {
			t.Errorf("empty command: %v", err)
		}
		if err := b.Mkdir(ctx, "work", MkdirOptions{}); err != nil {
			t.Fatal(err)
		}
		if out, err := b.Exec(ctx, "pwd", ExecOptions{Dir: "work"}); err != nil || string(out) != b.RootDir()+"/work\n" {
			t.Errorf("exec in Dir: %q %v", out, err)
		}
		if _, err := b.Exec(ctx, "pwd", ExecOptions{Dir: "../.."}); !errcode.Is(err, errcode.PathEscapeAttempt) {
			t.Errorf("exec in a Dir outside: %v", err)
		}
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		began := time.Now()
		if _, err := b.Exec(cctx, "sleep 30", ExecOptions{}); err == nil {
			t.Error("a cancelled command succeeded")
		}
		if time.Since(began) > 20*time.Second { // a hang guard
			t.Error("cancellation did not end the command")
		}
		if out, err := b.Exec(ctx, "cat", ExecOptions{Stdin: strings.NewReader("piped")}); err != nil || string(out) != "piped" {
			t.Errorf("stdin: %q %v", out, err)
		}
	})

	t.Run("scopes", func(t *testing.T) {
		b := fresh(t)
		b.Write(ctx, "secret.txt", []byte("parent's"))
		s, err := b.Scope("users/a", ScopeOptions{Env: map[string]string{"LEVEL": "one", "A": "a"}})
		if err != nil {
			t.Fatal(err)
		}
		if s.Kind() != "scoped" || s.RootDir() != b.RootDir()+"/users/a" {
			t.Errorf("scope: %s %s", s.Kind(), s.RootDir())
		}
		// First writes create the scope root, once, under concurrency.
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.Write(ctx, "f"+string(rune('a'+i)), []byte("x")); err != nil {
					t.Errorf("concurrent first write: %v", err)
				}
			}()
		}
		wg.Wait()
		if names, _ := b.Readdir(ctx, "users/a"); len(names) != 16 {
			t.Errorf("scope holds %d files", len(names))
		}
		if _, err := s.Read(ctx, "../../secret.txt"); !errcode.Is(err, errcode.PathEscapeAttempt) {
			t.Errorf("scope escape into the parent: %v", err)
		}
		n, err := s.Scope("deeper", ScopeOptions{Env: map[string]string{"LEVEL": "two"}})
		if err != nil {
			t.Fatal(err)
		}
		if n.RootDir() != b.RootDir()+"/users/a/deeper" {
			t.Errorf("nested: %s", n.RootDir())
		}
		if _, err := n.Read(ctx, "../fa"); !errcode.Is(err, errcode.PathEscapeAttempt) {
			t.Errorf("nested escape into its parent scope: %v", err)
		}
		if canExec {
			n.Write(ctx, "x", nil)
			out, err := n.Exec(ctx, `echo "$LEVEL $A $C $(pwd)"`, ExecOptions{Env: map[string]string{"C": "call"}})
			if err != nil || string(out) != "two a call "+n.RootDir()+"\n" {
				t.Errorf("nested env and cwd: %q %v", out, err)
			}
		}
		// Status is the root's; destroying a scope leaves the root alone.
		if s.Status() != StatusConnected {
			t.Errorf("scope status %s", s.Status())
		}
		if err := s.Destroy(); err != nil {
			t.Fatal(err)
		}
		if s.Status() != StatusDestroyed || b.Status() != StatusConnected {
			t.Errorf("after the scope's destroy: scope %s, root %s", s.Status(), b.Status())
		}
		if _, err := s.Read(ctx, "fa"); !errors.Is(err, ErrDestroyed) {
			t.Errorf("a destroyed scope still reads: %v", err)
		}
		if _, err := b.Read(ctx, "users/a/fa"); err != nil {
			t.Errorf("the root after a scope's destroy: %v", err)
		}
		// Destroying the root orphans its scopes.
		b.Destroy()
		if n.Status() != StatusDestroyed {
			t.Errorf("an orphaned scope's status: %s", n.Status())
		}
		if _, err := n.Read(ctx, "x"); !errors.Is(err, ErrDestroyed) {
			t.Errorf("an orphaned scope reads: %v", err)
		}
	})

	t.Run("lifecycle", func(t *testing.T) {
		b := mk(t)
		var changes []StatusChange
		var mu sync.Mutex
		done := make(chan struct{})
		b.OnStatusChange(func(c StatusChange) {
			mu.Lock()
			changes = append(changes, c)
			mu.Unlock()
			close(done)
		})
		if b.Status() != StatusConnected {
			t.Errorf("initial status %s", b.Status())
		}
		var closed []string
		b.Track(closerFunc(func() error { closed = append(closed, "first"); return nil }))
		b.Track(closerFunc(func() error { closed = append(closed, "second"); return nil }))
		cs, err := b.MCPClient(ctx, mcpOpts)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": "m.txt", "content": "via MCP"}})
		if err != nil || res.IsError {
			t.Fatalf("MCP write: %v %v", err, res)
		}
		if got, _ := b.Read(ctx, "m.txt"); string(got) != "via MCP" {
			t.Errorf("MCP write reached the backend: %q", got)
		}
		if err := b.Destroy(); err != nil {
			t.Fatal(err)
		}
		if err := b.Destroy(); err != nil {
			t.Errorf("a second destroy: %v", err)
		}
		<-done
		mu.Lock()
		if len(changes) != 1 || changes[0].From != StatusConnected || changes[0].To != StatusDestroyed {
			t.Errorf("transitions %+v; want connected → destroyed only", changes)
		}
		mu.Unlock()
		if !slices.Equal(closed, []string{"second", "first"}) {
			t.Errorf("closers ran %v; want the last registered first", closed)
		}
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": "m.txt"}}); err == nil {
			t.Error("the MCP session still works after destroy")
		}
		var late atomic.Bool
		b.Track(closerFunc(func() error { late.Store(true); return nil }))
		if !late.Load() {
			t.Error("Track after destroy did not close at once")
		}
		if _, err := b.Read(ctx, "m.txt"); !errors.Is(err, ErrDestroyed) {
			t.Errorf("read after destroy: %v", err)
		}
	})
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

var _ io.Closer = closerFunc(nil)

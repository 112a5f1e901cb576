package watch

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func setup(t *testing.T, opts Options) (*Manager, fsops.Workspace, string) {
	t.Helper()
	root := t.TempDir()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := New(opts)
	t.Cleanup(func() { m.Close(); ws.Close() })
	return m, ws, root
}

func poll(t *testing.T, m *Manager, ws fsops.Workspace, dir string, cursor int64, wait time.Duration) Changes {
	t.Helper()
	ch, err := m.Poll(context.Background(), "", ws, dir, cursor, wait)
	if err != nil {
		t.Fatalf("Poll(%s, %d): %v", dir, cursor, err)
	}
	return ch
}

// pollUntil polls until the changes seen include every path of want.
func pollUntil(t *testing.T, m *Manager, ws fsops.Workspace, dir string, cursor int64, want ...string) (map[string]string, int64) {
	t.Helper()
	seen := map[string]string{}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ch := poll(t, m, ws, dir, cursor, 2*time.Second)
		for _, e := range ch.Events {
			seen[e.Path] += "|" + e.Op
		}
		cursor = ch.Cursor
		all := true
		for _, p := range want {
			if _, ok := seen[p]; !ok {
				all = false
			}
		}
		if all {
			return seen, cursor
		}
	}
	t.Fatalf("changes seen %v; want %v", seen, want)
	return nil, 0
}

// TestWatchFollowsTheTree: creates, writes and removals anywhere below the
// directory arrive, in new directories too, with paths relative to the
// caller's workspace; a poll with nothing new times out with the same
// cursor.
func TestWatchFollowsTheTree(t *testing.T) {
	m, ws, root := setup(t, Options{})
	start := poll(t, m, ws, ".", -1, 0)
	if start.Cursor != 0 || len(start.Events) != 0 {
		t.Fatalf("start: %+v", start)
	}
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("1"), 0o644)
	os.MkdirAll(filepath.Join(root, "out/deep"), 0o755)
	_, cur := pollUntil(t, m, ws, ".", start.Cursor, "a.txt", "out")
	// The new directories are followed.
	os.WriteFile(filepath.Join(root, "out/deep/b.bin"), []byte("2"), 0o644)
	os.Remove(filepath.Join(root, "a.txt"))
	seen, cur := pollUntil(t, m, ws, ".", cur, "out/deep/b.bin", "a.txt")
	if !strings.Contains(seen["a.txt"], "remove") || !strings.Contains(seen["out/deep/b.bin"], "create") {
		t.Errorf("ops: %v", seen)
	}
	quiet := poll(t, m, ws, ".", cur, 150*time.Millisecond)
	if len(quiet.Events) != 0 || quiet.Cursor != cur {
		t.Errorf("a quiet poll: %+v (cursor was %d)", quiet, cur)
	}
	// A scope sees paths relative to itself, and cannot leave.
	sc, err := ws.Scope("out")
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c0 := poll(t, m, sc, "deep", -1, 0).Cursor
	os.WriteFile(filepath.Join(root, "out/deep/c"), []byte("3"), 0o644)
	pollUntil(t, m, sc, "deep", c0, "deep/c")
	for _, bad := range []string{"..", "../a.txt", "/etc"} {
		if _, err := m.Poll(context.Background(), "", sc, bad, -1, 0); err == nil {
			t.Errorf("a scope watched %q", bad)
		}
	}
	if _, err := m.Poll(context.Background(), "", ws, "out/deep/b.bin", -1, 0); !errcode.Is(err, errcode.InvalidArgument) {
		t.Errorf("watching a file: %v", err)
	}
}

// TestWatchDoesNotFollowLinks: a link to a directory outside the
// workspace, there from the start or made later, is not watched.
func TestWatchDoesNotFollowLinks(t *testing.T) {
	m, ws, root := setup(t, Options{})
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(root, "early"))
	cur := poll(t, m, ws, ".", -1, 0).Cursor
	os.Symlink(outside, filepath.Join(root, "late"))
	_, cur = pollUntil(t, m, ws, ".", cur, "late")
	os.WriteFile(filepath.Join(outside, "secret"), []byte("x"), 0o644)
	ch := poll(t, m, ws, ".", cur, 300*time.Millisecond)
	for _, e := range ch.Events {
		if strings.Contains(e.Path, "secret") {
			t.Fatalf("a change outside the workspace was reported: %+v", e)
		}
	}
}

// TestWatchBounds: MaxEvents drops the oldest and says so, a burst of
// changes to one file is one event, MaxWatchers refuses one more, a
// stale cursor says truncated, and Close ends the pollers.
func TestWatchBounds(t *testing.T) {
	m, ws, root := setup(t, Options{MaxEvents: 4, MaxWatchers: 1})
	cur := poll(t, m, ws, ".", -1, 0).Cursor
	for i := range 10 {
		os.WriteFile(filepath.Join(root, "f"+string(rune('0'+i))), []byte("x"), 0o644)
		time.Sleep(2 * DefaultDebounce) // separate events
	}
	ch := poll(t, m, ws, ".", cur, time.Second)
	if !ch.Truncated || len(ch.Events) != 4 || ch.Events[3].Path != "f9" {
		t.Errorf("after 10 files with MaxEvents 4: %+v", ch)
	}
	// One file written many times within the debounce window: one event.
	cur = ch.Cursor
	f, _ := os.Create(filepath.Join(root, "burst"))
	for range 50 {
		f.Write([]byte("x"))
	}
	f.Close()
	ch = poll(t, m, ws, ".", cur, 2*time.Second)
	n := 0
	for _, e := range ch.Events {
		if e.Path == "burst" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("a burst of writes to one file: %d events (%+v)", n, ch.Events)
	}
	os.Mkdir(filepath.Join(root, "other"), 0o755)
	if _, err := m.Poll(context.Background(), "", ws, "other", -1, 0); !errcode.Is(err, errcode.TooLarge) {
		t.Errorf("a second watcher with MaxWatchers 1: %v", err)
	}
	if ch := poll(t, m, ws, ".", 1<<40, 0); !ch.Truncated {
		t.Errorf("a cursor from the future: %+v", ch)
	}
	time.Sleep(3 * DefaultDebounce) // "other" has arrived
	now := poll(t, m, ws, ".", -1, 0).Cursor
	done := make(chan error, 1)
	go func() {
		_, err := m.Poll(context.Background(), "", ws, ".", now, 30*time.Second)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	m.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a poll survived Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting poll")
	}
}

// TestWatchIdleEnds: a watch nobody polls ends, and the next poll starts
// a new one.
func TestWatchIdleEnds(t *testing.T) {
	m, ws, _ := setup(t, Options{IdleTimeout: 100 * time.Millisecond})
	poll(t, m, ws, ".", -1, 0)
	time.Sleep(400 * time.Millisecond)
	m.mu.Lock()
	var w *watcher
	for _, x := range m.watchers {
		w = x
	}
	m.mu.Unlock()
	if w == nil || !w.ended() {
		t.Fatal("the idle watch did not end")
	}
	if ch := poll(t, m, ws, ".", -1, 0); ch.Cursor != 0 {
		t.Errorf("a new watch: %+v", ch)
	}
}

// TestWatchAttacks: what a hostile workspace can do to a watch.
func TestWatchAttacks(t *testing.T) {
	t.Run("writes that never pause do not hold a poll", func(t *testing.T) {
		m, ws, root := setup(t, Options{})
		cur := poll(t, m, ws, ".", -1, 0).Cursor
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(30 * time.Millisecond):
					os.WriteFile(filepath.Join(root, "busy"), []byte("x"), 0o644)
				}
			}
		}()
		defer close(stop)
		done := make(chan Changes, 1)
		go func() { done <- poll(t, m, ws, ".", cur, 500*time.Millisecond) }()
		select {
		case ch := <-done:
			if len(ch.Events) == 0 {
				t.Errorf("no events from a busy file: %+v", ch)
			}
		case <-time.After(10 * time.Second): // a hang guard, not a speed target
			t.Fatal("a poll under never-pausing writes did not return")
		}
	})
	t.Run("a deep tree is watched only as deep as a path can be named", func(t *testing.T) {
		m, ws, root := setup(t, Options{})
		long := strings.Repeat("d", 250)
		// 40 × 251 bytes: far past PATH_MAX, so made one level at a time
		// beneath the last one's descriptor, as a command in it could.
		fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		for range 40 {
			if err := unix.Mkdirat(fd, long, 0o755); err != nil {
				t.Fatal(err)
			}
			next, err := unix.Openat(fd, long, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			unix.Close(fd)
			if err != nil {
				t.Fatal(err)
			}
			fd = next
		}
		unix.Close(fd)
		t.Cleanup(func() { os.RemoveAll(filepath.Join(root, long)) })
		poll(t, m, ws, ".", -1, 0)
		m.mu.Lock()
		var n int
		for _, w := range m.watchers {
			n = w.tree.Dirs()
		}
		m.mu.Unlock()
		if n > maxPath/251+2 {
			t.Errorf("%d directories watched in a chain whose paths pass %d bytes after %d", n, maxPath, maxPath/251)
		}
	})
	t.Run("a watcher is shared only for the same directory", func(t *testing.T) {
		m, ws, root := setup(t, Options{})
		for _, d := range []string{"b", "secret"} {
			os.Mkdir(filepath.Join(root, d), 0o755)
		}
		os.Symlink("../secret", filepath.Join(root, "b/l"))
		wide := poll(t, m, ws, "b/l", -1, 0).Cursor // the wide caller: b/l is secret/
		_ = wide
		os.Remove(filepath.Join(root, "b/l"))
		os.Mkdir(filepath.Join(root, "b/l"), 0o755)
		scoped, err := ws.Scope("b")
		if err != nil {
			t.Fatal(err)
		}
		defer scoped.Close()
		cur := poll(t, m, scoped, "l", -1, 0).Cursor
		os.WriteFile(filepath.Join(root, "secret/private.key"), []byte("k"), 0o600)
		os.WriteFile(filepath.Join(root, "b/l/mine"), []byte("m"), 0o600)
		seen, _ := pollUntil(t, m, scoped, "l", cur, "l/mine")
		for p := range seen {
			if strings.Contains(p, "private") {
				t.Fatalf("the scoped caller saw %s of the other directory", p)
			}
		}
	})
	t.Run("a directory moved out of the tree is not followed", func(t *testing.T) {
		m, ws, root := setup(t, Options{})
		outside := t.TempDir()
		os.Mkdir(filepath.Join(root, "sub"), 0o755)
		cur := poll(t, m, ws, ".", -1, 0).Cursor
		if err := os.Rename(filepath.Join(root, "sub"), filepath.Join(outside, "sub")); err != nil {
			t.Skipf("cannot move across these directories: %v", err)
		}
		_, cur = pollUntil(t, m, ws, ".", cur, "sub")
		os.WriteFile(filepath.Join(outside, "sub", "payroll.xlsx"), []byte("x"), 0o600)
		ch := poll(t, m, ws, ".", cur, 300*time.Millisecond)
		for _, e := range ch.Events {
			if strings.Contains(e.Path, "payroll") {
				t.Fatalf("a change in the moved-out directory was reported: %+v", e)
			}
		}
	})
}

// TestWatchToolRefusals: bad arguments to watch_changes are refused with
// what is wrong, and start no watch.
func TestWatchToolRefusals(t *testing.T) {
	m, ws, root := setup(t, Options{})
	os.WriteFile(filepath.Join(root, "f"), nil, 0o644)
	reg := registry.New(registry.Options{})
	if err := reg.Set("watch", m.Tools()); err != nil {
		t.Fatal(err)
	}
	for args, want := range map[string]string{
		`{"cursor":-1}`:       "cursor -1: use the one the last call returned",
		`{"timeoutMs":60001}`: "timeoutMs 60001: from 0 to 60000",
		`{"timeoutMs":-5}`:    "timeoutMs -5: from 0 to 60000",
		`{"path":"f"}`:        "not a directory of the workspace",
		`{"path":"../.."}`:    "escapes",
		`{"recursive":true}`:  "recursive",
		`{"cursor":"x"}`:      "cursor",
	} {
		res, err := reg.Call(context.Background(), "watch_changes", registry.Call{Args: json.RawMessage(args), Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(text, want) {
			t.Errorf("watch_changes %s: %v %q, want an error naming %q", args, res.IsError, text, want)
		}
	}
	m.mu.Lock()
	n := len(m.watchers)
	m.mu.Unlock()
	if n != 0 {
		t.Errorf("refused calls started %d watches", n)
	}
}

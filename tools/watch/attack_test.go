package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// The attack review of watch_changes (docs/security.md): what a client
// holding a token, scoped or read-only, can make a watch do.

// TestAttackWatchRootAndWaysOut: "/" is the caller's own root (the
// workspace's, or its scope's), never the host's; a watched path that is
// a link out, ".." past the root, or another scope's directory is refused;
// a scope's watch of its root reports nothing of a sibling scope.
func TestAttackWatchRootAndWaysOut(t *testing.T) {
	m, ws, root := setup(t, Options{})
	outside := t.TempDir()
	for _, d := range []string{"users/a", "users/b"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.Symlink(outside, filepath.Join(root, "out"))
	os.Symlink("../a", filepath.Join(root, "users/b/toa"))
	b, err := ws.Scope("users/b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tc := range []struct {
		scope string
		path  string
	}{
		{"", "out"}, {"", "out/x"}, {"", ".."}, {"", "users/../.."},
		{"users/b", "../a"}, {"users/b", "toa"}, {"users/b", "/../a"}, {"users/b", "../../out"},
	} {
		w := ws
		if tc.scope != "" {
			w = b
		}
		if _, err := m.Poll(context.Background(), "", w, tc.path, -1, 0); err == nil || !errcode.Is(err, errcode.PathEscapeAttempt) && !errcode.Is(err, errcode.NotFound) {
			t.Errorf("scope %q watching %q: %v; want an escape refused", tc.scope, tc.path, err)
		}
	}
	m.mu.Lock()
	n := len(m.watchers)
	m.mu.Unlock()
	if n != 0 {
		t.Fatalf("refused watches started %d watchers", n)
	}
	// "/" of scope b is b's root.
	cur := poll(t, m, b, "/", -1, 0).Cursor
	os.WriteFile(filepath.Join(root, "users/a/secret"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(outside, "host"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(root, "users/b/mine"), []byte("x"), 0o600)
	seen, _ := pollUntil(t, m, b, "/", cur, "mine")
	for p := range seen {
		if p != "mine" {
			t.Errorf("scope b's watch of / reported %q", p)
		}
	}
	bi, err1 := b.Stat("/")
	wi, err2 := ws.Stat(".")
	if err1 != nil || err2 != nil || bi.ID() == wi.ID() {
		t.Errorf("scope b's / is the workspace's root (%v, %v)", err1, err2)
	}
}

// TestAttackWatchMany: ten thousand polls that start watches, over one
// directory and over many, hold at most MaxWatchers watchers: two
// descriptors and one goroutine each; the others are refused saying so.
func TestAttackWatchMany(t *testing.T) {
	m, ws, root := setup(t, Options{})
	for i := range 40 {
		os.Mkdir(filepath.Join(root, fmt.Sprint("d", i)), 0o755)
	}
	fdsBefore, gBefore := fds(t), runtime.NumGoroutine()
	refused := 0
	for i := range 10000 {
		dir := "."
		if i%2 == 1 {
			dir = fmt.Sprint("d", (i/2)%40)
		}
		if _, err := m.Poll(context.Background(), "", ws, dir, -1, 0); err != nil {
			if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "16 directories are watched already") {
				t.Fatalf("poll %d of %s: %v", i, dir, err)
			}
			refused++
		}
	}
	m.mu.Lock()
	n := len(m.watchers)
	m.mu.Unlock()
	if n != DefaultMaxWatchers || refused == 0 {
		t.Errorf("%d watchers after 10,000 polls over 41 directories (%d refused); want %d", n, refused, DefaultMaxWatchers)
	}
	if d := fds(t) - fdsBefore; d > 2*DefaultMaxWatchers {
		t.Errorf("%d more descriptors for %d watchers", d, n)
	}
	if g := runtime.NumGoroutine() - gBefore; g > DefaultMaxWatchers {
		t.Errorf("%d more goroutines for %d watchers", g, n)
	}
}

// TestAttackWatchPastMaxDirs: directories made below a watch past its
// MaxDirs are not watched, and a poll says changes may be missing
// (truncated) rather than answering as if it saw everything.
func TestAttackWatchPastMaxDirs(t *testing.T) {
	m, ws, root := setup(t, Options{MaxDirs: 4})
	cur := poll(t, m, ws, ".", -1, 0).Cursor
	for i := range 10 {
		os.Mkdir(filepath.Join(root, fmt.Sprint("d", i)), 0o755)
	}
	deadline := time.Now().Add(10 * time.Second) // a hang guard
	truncated, seen := false, map[string]bool{}
	for len(seen) < 10 && time.Now().Before(deadline) {
		ch := poll(t, m, ws, ".", cur, 2*time.Second)
		truncated = truncated || ch.Truncated
		for _, e := range ch.Events {
			seen[e.Path] = true
		}
		cur = ch.Cursor
	}
	if len(seen) != 10 || !truncated {
		t.Errorf("10 directories made below a watch of at most 4: %d seen, truncated %v; want all 10 and truncated", len(seen), truncated)
	}
	m.mu.Lock()
	var dirs int
	for _, w := range m.watchers {
		dirs = w.tree.Dirs()
	}
	m.mu.Unlock()
	if dirs > 4 {
		t.Errorf("%d directories watched; MaxDirs 4", dirs)
	}
}

// TestAttackWatchFlood: changes faster than anyone reads keep at most
// MaxEvents events (a poll says truncated), whatever their rate.
func TestAttackWatchFlood(t *testing.T) {
	m, ws, root := setup(t, Options{MaxEvents: 64})
	cur := poll(t, m, ws, ".", -1, 0).Cursor
	for i := range 5000 {
		os.WriteFile(filepath.Join(root, fmt.Sprint("f", i)), nil, 0o644)
	}
	ch := poll(t, m, ws, ".", cur, 2*time.Second)
	m.mu.Lock()
	var events, capacity int
	for _, w := range m.watchers {
		w.mu.Lock()
		events, capacity = len(w.events), cap(w.events)
		w.mu.Unlock()
	}
	m.mu.Unlock()
	if !ch.Truncated || len(ch.Events) > 64 || events > 64 || capacity > 2*64 {
		t.Errorf("5000 changes, MaxEvents 64: answered %d events (truncated %v), kept %d (capacity %d)", len(ch.Events), ch.Truncated, events, capacity)
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

// TestAttackWatchSwappedName: a directory swapped under its name between
// the Stat that keys the watcher and the open that starts it (renames a
// command can race with a poll) opens a directory that may be watched
// already; the live watcher is shared, not replaced, so no watcher runs on
// outside the map and MaxWatchers. The test takes that branch directly:
// the key of one directory, the start of another, already watched.
func TestAttackWatchSwappedName(t *testing.T) {
	m, ws, root := setup(t, Options{MaxWatchers: 2})
	for _, d := range []string{"a", "b"} {
		os.Mkdir(filepath.Join(root, d), 0o755)
	}
	poll(t, m, ws, "b", -1, 0)
	m.mu.Lock()
	var wb *watcher
	for _, w := range m.watchers {
		wb = w
	}
	m.mu.Unlock()
	ia, err := ws.Stat("a")
	if err != nil {
		t.Fatal(err)
	}
	var started *watcher
	got, err := m.watcher(ia.ID(), "", func() (*watcher, error) {
		w, err := newWatcher(ws, "b", m.opts) // "a" was swapped for b
		started = w
		return w, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != wb || wb.ended() || !started.ended() {
		t.Errorf("b's watcher replaced by a second one (shared %v, first ended %v, second ended %v)", got == wb, wb.ended(), started.ended())
	}
}

// TestAttackOneTokenCannotTakeEveryWatcher: where --tokens admits several
// tokens, the watchers one token started hold at most half of
// MaxWatchers, so another token still watches its own directory; a
// watcher another token started is shared with it whatever its share.
func TestAttackOneTokenCannotTakeEveryWatcher(t *testing.T) {
	m, ws, root := setup(t, Options{MaxWatchers: 4, Tokens: true})
	for _, d := range []string{"a1", "a2", "a3", "b1", "c1"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"a1", "a2"} {
		if _, err := m.Poll(context.Background(), "alice", ws, d, -1, 0); err != nil {
			t.Fatalf("alice watches %s: %v", d, err)
		}
	}
	_, err := m.Poll(context.Background(), "alice", ws, "a3", -1, 0)
	if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), `token "alice" holds 2 of the 4 watched directories, its share`) {
		t.Errorf("alice's third watcher: %v", err)
	}
	if _, err := m.Poll(context.Background(), "bob", ws, "b1", -1, 0); err != nil {
		t.Errorf("bob after alice took her share: %v", err)
	}
	if _, err := m.Poll(context.Background(), "alice", ws, "b1", -1, 0); err != nil {
		t.Errorf("alice polling the watcher bob started: %v", err)
	}
	if _, err := m.Poll(context.Background(), "", ws, "c1", -1, 0); err != nil {
		t.Errorf("the daemon's token: %v", err)
	}
}

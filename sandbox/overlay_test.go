//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// txDir is a transaction directory outside the workspace.
func txDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestOverlayLeavesWorkspace: a command run on an overlay writes, deletes
// and edits; the workspace is untouched, and the upper layer the result
// hands back holds exactly those changes (a whiteout for the deletion).
func TestOverlayLeavesWorkspace(t *testing.T) {
	e, ws := newExec(t, ModeBwrap)
	if err := os.WriteFile(filepath.Join(ws, "a"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(ws, "src", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	ov := &Overlay{Dir: txDir(t), MaxBytes: 1 << 20, MaxFiles: 100}
	res, err := e.Run(context.Background(), Request{Command: "echo new >> a && echo b > b && rm -rf src && pwd && cat a", Overlay: ov})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Upper.Close()
	if res.ExitCode != 0 || string(res.Stdout) != ws+"\nold\nnew\n" {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a")); string(b) != "old\n" {
		t.Fatalf("workspace a = %q", b)
	}
	if _, err := os.Stat(filepath.Join(ws, "b")); !os.IsNotExist(err) {
		t.Fatalf("b written to the workspace: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "src", "x")); err != nil {
		t.Fatalf("src removed from the workspace: %v", err)
	}
	up := "/proc/self/fd/" + strconv.Itoa(int(res.Upper.Fd())) + "/upper"
	if b, err := os.ReadFile(up + "/a"); err != nil || string(b) != "old\nnew\n" {
		t.Fatalf("upper a = %q, %v", b, err)
	}
	if b, err := os.ReadFile(up + "/b"); err != nil || string(b) != "b\n" {
		t.Fatalf("upper b = %q, %v", b, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(up+"/src", &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Fatalf("src is no whiteout: %+v %v", st, err)
	}
}

// TestOverlayBounded: a command that writes more files than the
// transaction's limit gets ENOSPC, and the workspace has none of them.
func TestOverlayBounded(t *testing.T) {
	e, ws := newExec(t, ModeBwrap)
	ov := &Overlay{Dir: txDir(t), MaxBytes: 1 << 20, MaxFiles: 50}
	res, err := e.Run(context.Background(), Request{Command: "for i in $(seq 1 200); do : > f$i || exit 7; done", Overlay: ov})
	if err != nil {
		t.Fatal(err)
	}
	res.Upper.Close()
	if res.ExitCode != 7 || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Fatalf("exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Fatalf("workspace has %d entries", len(ents))
	}
	res, err = e.Run(context.Background(), Request{Command: "head -c 2000000 /dev/zero > big", Overlay: ov})
	if err != nil {
		t.Fatal(err)
	}
	res.Upper.Close()
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "No space left on device") {
		t.Fatalf("2 MB into a 1 MB transaction: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
}

// TestOverlayRefusedOutsideBwrap: in the other modes a transaction is
// refused naming bwrap, and nothing runs.
func TestOverlayRefusedOutsideBwrap(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeLandlock, ModeNone} {
		t.Run(string(mode), func(t *testing.T) {
			e, ws := newExec(t, mode)
			_, err := e.Run(context.Background(), Request{Command: "touch ran", Overlay: &Overlay{Dir: txDir(t), MaxBytes: 1 << 20, MaxFiles: 10}})
			if !errcode.Is(err, errcode.NotImplemented) || !strings.Contains(err.Error(), "bwrap") {
				t.Fatalf("err = %v", err)
			}
			if _, err := os.Stat(filepath.Join(ws, "ran")); !os.IsNotExist(err) {
				t.Fatal("the command ran")
			}
		})
	}
}

// TestOverlayDirChecked: a transaction directory inside the workspace, or
// one the overlay's options cannot name, is refused before anything runs.
func TestOverlayDirChecked(t *testing.T) {
	e, ws := newExec(t, ModeBwrap)
	for _, dir := range []string{filepath.Join(ws, "tx"), "relative", txDir(t) + "/a,b"} {
		_, err := e.Run(context.Background(), Request{Command: "true", Overlay: &Overlay{Dir: dir, MaxBytes: 1, MaxFiles: 1}})
		if !errcode.Is(err, errcode.InvalidArgument) {
			t.Fatalf("%s: err = %v", dir, err)
		}
	}
}

// TestOverlayRunAs: a root daemon's transaction with --run-as runs as that
// user (the files it writes are the user's), on the overlay.
func TestOverlayRunAs(t *testing.T) {
	needBwrap(t)
	name := throwawayUser(t, "agov")
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	ws := testenv.SharedTempDir(t) // the user reaches and writes it, whatever TMPDIR is
	os.Chmod(ws, 0o777)
	e, err := New(Config{Mode: ModeBwrap, WorkspaceRoot: ws, RunAs: name})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := e.Run(context.Background(), Request{Command: "id -u && echo x > f", Overlay: &Overlay{Dir: testenv.SharedTempDir(t), MaxBytes: 1 << 20, MaxFiles: 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Upper.Close()
	if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != u.Uid {
		t.Fatalf("exit %d stdout %q stderr %q; want uid %s", res.ExitCode, res.Stdout, res.Stderr, u.Uid)
	}
	var st unix.Stat_t
	if err := unix.Lstat("/proc/self/fd/"+strconv.Itoa(int(res.Upper.Fd()))+"/upper/f", &st); err != nil || strconv.Itoa(int(st.Uid)) != u.Uid {
		t.Fatalf("upper f owner %d (%v); want %s", st.Uid, err, u.Uid)
	}
	if _, err := os.Stat(filepath.Join(ws, "f")); !os.IsNotExist(err) {
		t.Fatal("f written to the workspace")
	}
}

// TestOverlayBothWays: a root daemon's in-place mounts and the trampoline
// give the same run: the workspace untouched, the change in the layer.
func TestOverlayBothWays(t *testing.T) {
	for _, tramp := range []bool{false, true} {
		t.Run(fmt.Sprint("trampoline=", tramp), func(t *testing.T) {
			defer func(v bool) { overlayByTrampoline = v }(overlayByTrampoline)
			overlayByTrampoline = tramp
			e, ws := newExec(t, ModeBwrap)
			overlayEdit(t, e, ws)
		})
	}
}

// overlayEdit runs `sed -i s/old/new/ a` (a direct command: the direct
// path must bind the overlay too) as a transaction on e, whose workspace
// is ws, and checks that the workspace keeps a's old content and the
// upper layer holds the new one.
func overlayEdit(t *testing.T, e Executor, ws string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(ws, "a"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := e.Run(context.Background(), Request{Command: "sed -i s/old/new/ a", Overlay: &Overlay{Dir: txDir(t), MaxBytes: 1 << 20, MaxFiles: 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Upper.Close()
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a")); string(b) != "old\n" {
		t.Fatalf("workspace a = %q", b)
	}
	if b, err := os.ReadFile("/proc/self/fd/" + strconv.Itoa(int(res.Upper.Fd())) + "/upper/a"); err != nil || string(b) != "new\n" {
		t.Fatalf("upper a = %q, %v", b, err)
	}
}

// BenchmarkOverlayTrue: `true` plain and on an overlay, in place (a root
// daemon) and through the trampoline, alternating in one loop.
func BenchmarkOverlayTrue(b *testing.B) {
	needBwrap(b)
	ws, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Config{Mode: ModeBwrap, WorkspaceRoot: ws})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	dir := b.TempDir()
	ctx := context.Background()
	var plain, here, tramp time.Duration
	n := 0
	overlay := func(byTrampoline bool) time.Duration {
		overlayByTrampoline = byTrampoline
		defer func() { overlayByTrampoline = false }()
		t0 := time.Now()
		d, err := NewOverlayDir(dir, strconv.Itoa(n)+strconv.FormatBool(byTrampoline))
		if err != nil {
			b.Fatal(err)
		}
		res, err := e.Run(ctx, Request{Command: "true", Overlay: &Overlay{Dir: d, MaxBytes: 1 << 20, MaxFiles: 100}})
		if err != nil {
			b.Fatal(err)
		}
		res.Upper.Close()
		RemoveOverlayDir(d)
		return time.Since(t0)
	}
	for b.Loop() {
		t0 := time.Now()
		if _, err := e.Run(ctx, Request{Command: "true"}); err != nil {
			b.Fatal(err)
		}
		plain += time.Since(t0)
		if os.Geteuid() == 0 {
			here += overlay(false)
		}
		tramp += overlay(true)
		n++
	}
	msPer := func(d time.Duration) float64 { return float64(d) / float64(n) / 1e6 }
	b.ReportMetric(msPer(plain), "plain-ms")
	if os.Geteuid() == 0 {
		b.ReportMetric(msPer(here), "inplace-ms")
		b.ReportMetric(float64(here)/float64(plain), "inplace-ratio")
	}
	b.ReportMetric(msPer(tramp), "trampoline-ms")
	b.ReportMetric(float64(tramp)/float64(plain), "trampoline-ratio")
}

// TestClearOverlayDirsFollowsNoLink holds that clearing what dead daemons
// left detaches only the mounts on their own transaction directories: a
// symlink planted there (transactions/999999999/tx -> a mount of the host)
// is removed, never followed, and its target's mount stays; a real
// leftover tmpfs with an overlay on its merged/ is detached and removed.
func TestClearOverlayDirsFollowsNoLink(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	victim := t.TempDir()
	if err := unix.Mount("tmpfs", victim, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(victim, unix.MNT_DETACH) })
	parent := filepath.Join(t.TempDir(), "transactions")
	dead := filepath.Join(parent, "999999999")
	if err := os.MkdirAll(dead, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dead, "tx")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(parent, "999999998")); err != nil {
		t.Fatal(err)
	}
	// A real leftover: the tmpfs and, on its merged/, a second mount.
	left := filepath.Join(dead, "real")
	if err := os.Mkdir(left, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", left, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(left, "merged"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", filepath.Join(left, "merged"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	var before, after unix.Stat_t
	if err := unix.Stat(victim, &before); err != nil {
		t.Fatal(err)
	}
	if err := ClearOverlayDirs(parent); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(victim, &after); err != nil {
		t.Fatal(err)
	}
	if before.Dev != after.Dev {
		t.Fatalf("ClearOverlayDirs followed a planted link and detached the mount on %s", victim)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), left) {
		t.Fatalf("a leftover transaction's mounts are still there:\n%s", mi)
	}
	if ents, err := os.ReadDir(parent); err != nil || len(ents) != 0 {
		t.Fatalf("transactions directory after clearing: %v (%v)", ents, err)
	}
	if err := ClearOverlayDirs("transactions"); err == nil {
		t.Fatal("a relative transactions directory was taken")
	}
}

// TestOverlayMountsStayOutOfTheHostNamespace holds that a root daemon's
// in-place transaction mounts its tmpfs and overlay in a mount namespace
// of their own: while the command runs, another process of the host sees
// neither in its mount table (no transaction id, no upper or work path, no
// propagation to peers, nothing left if the daemon is killed), and the
// command's changes still land in the layer Result.Upper holds.
func TestOverlayMountsStayOutOfTheHostNamespace(t *testing.T) {
	needBwrap(t)
	if os.Geteuid() != 0 {
		t.Skip("the in-place overlay is a root daemon's: run the test as root")
	}
	e, _ := newExec(t, ModeBwrap)
	dir := txDir(t)
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinR.Close()
	var once sync.Once
	var seen string
	look := func() {
		// Another process of the host namespace, while the command runs.
		out, _ := exec.Command("cat", "/proc/self/mountinfo").Output()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.Contains(l, dir) {
				seen += l + "\n"
			}
		}
		stdinW.Close()
	}
	res, err := e.Run(context.Background(), Request{Command: "echo started; read x; echo done > f",
		Stdin: stdinR, Overlay: &Overlay{Dir: dir, MaxBytes: 1 << 20, MaxFiles: 100},
		OnOutput: func(stream string, b []byte) {
			if bytes.Contains(b, []byte("started")) {
				once.Do(look)
			}
		}})
	once.Do(func() { stdinW.Close() })
	if err != nil {
		t.Fatal(err)
	}
	defer res.Upper.Close()
	if seen != "" {
		t.Fatalf("while the transaction's command ran, another process on the host saw its mounts:\n%s", seen)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d/upper/f", res.Upper.Fd()))
	if err != nil || string(b) != "done\n" {
		t.Fatalf("the command's file in the layer: %q (%v); stdout %q stderr %q", b, err, res.Stdout, res.Stderr)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the transaction's directory on the host holds %d entries: the tmpfs was mounted here", len(ents))
	}
}

// TestOverlayRunAsUnderTheDaemonsDirectory holds that a root daemon's
// --run-as transaction works in the daemon's own layout: the trampoline
// runs as the run-as user and mounts on <state-dir>/transactions/<pid>/<id>
// by name, so the daemon gives that user the transaction's directory and
// keeps the directories above it searchable (0711); a state directory that
// user cannot search is refused before anything runs, naming it.
func TestOverlayRunAsUnderTheDaemonsDirectory(t *testing.T) {
	needBwrap(t)
	name := throwawayUser(t, "agtx")
	ws := testenv.SharedTempDir(t) // the user reaches and writes it, whatever TMPDIR is
	os.Chmod(ws, 0o777)
	e, err := New(Config{Mode: ModeBwrap, WorkspaceRoot: ws, RunAs: name})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, mode := range []os.FileMode{0o755, 0o700} {
		state, err := os.MkdirTemp(testenv.SharedTempDir(t), "agtxstate") // as /var/lib/agentbe: root's
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(state)
		if err := os.Chmod(state, mode); err != nil {
			t.Fatal(err)
		}
		// As transactions.New and the manager make them.
		if err := os.MkdirAll(filepath.Join(state, "transactions"), 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(state, "transactions"), 0o711); err != nil {
			t.Fatal(err)
		}
		dir, err := NewOverlayDir(filepath.Join(state, "transactions", "1"), "tx")
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.Run(context.Background(), Request{Command: "echo x > f", Overlay: &Overlay{Dir: dir, MaxBytes: 1 << 20, MaxFiles: 10}})
		if mode == 0o700 {
			if err == nil {
				res.Upper.Close()
				t.Fatalf("a --run-as transaction under a state directory (0700) its user cannot search ran")
			}
			if !strings.Contains(err.Error(), state+" is mode 0700") || !strings.Contains(err.Error(), "--run-as") {
				t.Fatalf("the refusal does not name the directory and why: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("a --run-as transaction in the daemon's own transactions directory: %v", err)
		}
		b, rerr := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d/upper/f", res.Upper.Fd()))
		res.Upper.Close()
		if rerr != nil || string(b) != "x\n" {
			t.Fatalf("the command's file in the layer: %q (%v)", b, rerr)
		}
		if _, err := os.Stat(filepath.Join(ws, "f")); !os.IsNotExist(err) {
			t.Fatalf("the workspace has f: %v", err)
		}
	}
}

// TestOverlayParentsJudgedByTheirLocks holds that a start's clearing
// judges a daemon's directory by its lock, not its name: a held lock (a
// live daemon, whatever its pid namespace) keeps the directory and its
// transaction directories; a released one (a killed daemon) has it
// removed; a lock file it cannot judge (a symlink) leaves it; and a fresh
// directory made while another start clears, again and again, is never
// lost (its maker notices a directory cleared before its lock was taken
// and makes another).
func TestOverlayParentsJudgedByTheirLocks(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "transactions")
	live, err := NewOverlayParent(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	tx, err := NewOverlayDir(live.Dir, "tx")
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(live.Dir, &st); err != nil || st.Mode&0o7777 != 0o711 {
		t.Fatalf("the daemon's directory is mode %04o (%v), not 0711", st.Mode&0o7777, err)
	}
	dead, err := NewOverlayParent(parent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewOverlayDir(dead.Dir, "tx"); err != nil {
		t.Fatal(err)
	}
	dead.lock.Close() // killed: the descriptor closed, the directory left
	dead.lock = nil
	odd := filepath.Join(parent, "d-odd")
	if err := os.Mkdir(odd, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(odd, OverlayLockFile)); err != nil {
		t.Fatal(err)
	}
	if err := ClearOverlayDirs(parent); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tx); err != nil {
		t.Fatalf("a live daemon's transaction directory was removed: %v", err)
	}
	if _, err := os.Lstat(dead.Dir); !os.IsNotExist(err) {
		t.Fatalf("a dead daemon's directory is left: %v", err)
	}
	if _, err := os.Lstat(odd); err != nil {
		t.Fatalf("a directory whose lock could not be judged was removed: %v", err)
	}

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_ = ClearOverlayDirs(parent)
			}
		}
	}()
	var made []*OverlayParent
	retries := parentRetries.Load()
	for range 200 {
		p, err := NewOverlayParent(parent)
		if err != nil {
			close(stop)
			<-done
			t.Fatal(err)
		}
		made = append(made, p)
	}
	close(stop)
	<-done
	// A directory is renamed into place with its lock held: another
	// start's clear never takes one from its maker.
	if n := parentRetries.Load() - retries; n != 0 {
		t.Errorf("%d names were taken from their maker by a clear running beside it", n)
	}
	for _, p := range made {
		if _, err := os.Stat(filepath.Join(p.Dir, OverlayLockFile)); err != nil {
			t.Errorf("a directory made while another start cleared was lost: %v", err)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Lstat(p.Dir); !os.IsNotExist(err) {
			t.Errorf("%s after Close: %v", p.Dir, err)
		}
	}
}

// A daemon's directory is made, and its lock taken, under a .new- name
// and then renamed to its d- name: another start's ClearOverlayDirs
// leaves a young .new- directory to its maker, clears an old one (a maker
// killed half-way), and a made directory leaves no .new- name behind.
func TestOverlayParentMadeUnderATempName(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "transactions")
	p, err := NewOverlayParent(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	names := func() []string {
		ents, err := os.ReadDir(parent)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	if got := names(); len(got) != 1 || got[0] != filepath.Base(p.Dir) || !strings.HasPrefix(got[0], "d-") {
		t.Fatalf("after NewOverlayParent the transactions directory holds %v, want only %s", got, filepath.Base(p.Dir))
	}
	making := filepath.Join(parent, newParentPrefix+"0123456789abcdef")
	if err := os.Mkdir(making, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := ClearOverlayDirs(parent); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(making); err != nil {
		t.Fatalf("a directory being made was cleared: %v", err)
	}
	age := newParentAge
	newParentAge = 0
	defer func() { newParentAge = age }()
	if err := ClearOverlayDirs(parent); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(making); !os.IsNotExist(err) {
		t.Fatalf("a .new- directory left past newParentAge was not cleared: %v", err)
	}
	if _, err := os.Stat(filepath.Join(p.Dir, OverlayLockFile)); err != nil {
		t.Fatalf("a live daemon's directory was cleared: %v", err)
	}
}

package transactions

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// TestMain makes the test binary the trampoline that mounts a
// transaction's overlay (its commands run through /proc/self/exe).
func TestMain(m *testing.M) {
	sandboxexec.Main()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testbin.Cleanup() // the binaries BenchmarkTransactionTrueTrampoline built
		os.Exit(code)
	}))
}

// clock is a settable time for expiry.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// setup is a bwrap executor over a fresh workspace and a Manager.
func setup(t *testing.T, mod func(*Options)) (*Manager, fsops.Workspace, string) {
	t.Helper()
	testenv.Bwrap(t)
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeBwrap, WorkspaceRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	opts := Options{Executor: ex, Dir: filepath.Join(t.TempDir(), "transactions")}
	if mod != nil {
		mod(&opts)
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, ws, root
}

func runTx(t *testing.T, m *Manager, ws fsops.Workspace, command string) Result {
	t.Helper()
	res, err := m.Run(context.Background(), sandbox.Request{Command: command, Workspace: ws})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return res
}

// TestScopeSeesOnlyItsOwn: a transaction made in one scope is not seen,
// applied or discarded from another (nor from the root), and is from its
// own.
func TestScopeSeesOnlyItsOwn(t *testing.T) {
	m, ws, root := setup(t, nil)
	a, err := ws.Scope("a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ws.Scope("b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, s := range []fsops.Workspace{a, b} {
		if err := s.Mkdir(".", true); err != nil {
			t.Fatal(err)
		}
	}
	res := runTx(t, m, a, "echo x > f")
	if res.ID == "" {
		t.Fatal("no transaction")
	}
	for _, other := range []fsops.Workspace{b, ws} {
		if len(m.List(other)) != 0 {
			t.Fatal("another scope lists it")
		}
		if _, err := m.Apply(context.Background(), other, res.ID); !errcode.Is(err, errcode.NotFound) {
			t.Fatalf("apply from another scope: %v", err)
		}
		if err := m.Discard(other, res.ID); !errcode.Is(err, errcode.NotFound) {
			t.Fatalf("discard from another scope: %v", err)
		}
	}
	if len(m.List(a)) != 1 {
		t.Fatal("its own scope does not list it")
	}
	if _, err := m.Apply(context.Background(), a, res.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "a", "f")); string(got) != "x\n" {
		t.Fatalf("a/f = %q", got)
	}
}

// TestPendingBoundedAndExpiring: past MaxPending a transaction is refused
// naming the limit; one past its TTL is discarded and its directory
// removed; Close removes the rest.
func TestPendingBoundedAndExpiring(t *testing.T) {
	c := &clock{t: time.Now()}
	var dir string
	m, ws, _ := setup(t, func(o *Options) { o.MaxPending = 2; o.TTL = time.Hour; o.now = c.now; dir = o.Dir })
	mine := m.dir // this daemon's own, beside its lock file
	first := runTx(t, m, ws, "echo 1 > one")
	runTx(t, m, ws, "echo 2 > two")
	_, err := m.Run(context.Background(), sandbox.Request{Command: "echo 3 > three", Workspace: ws})
	if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "--transaction-max-pending 2") {
		t.Fatalf("third: %v", err)
	}
	c.add(2 * time.Hour)
	m.expire()
	if m.Pending() != 0 {
		t.Fatalf("%d pending after the TTL", m.Pending())
	}
	if _, err := m.Apply(context.Background(), ws, first.ID); !errcode.Is(err, errcode.NotFound) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("apply after expiry: %v", err)
	}
	runTx(t, m, ws, "echo 4 > four")
	ents, _ := os.ReadDir(mine)
	var txDirs []string
	for _, e := range ents {
		if e.Name() != sandbox.OverlayLockFile {
			txDirs = append(txDirs, e.Name())
		}
	}
	if len(txDirs) != 1 {
		t.Fatalf("%d transaction directories (%v), want 1", len(txDirs), txDirs)
	}
	m.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("%d entries in the transactions directory after Close", len(ents))
	}
	if _, err := m.Run(context.Background(), sandbox.Request{Command: "true", Workspace: ws}); err == nil {
		t.Fatal("Run after Close")
	}
}

// TestMillionFilesRefused: a command that tries to write a million files
// hits the transaction's file limit; the transaction is refused naming it,
// nothing is pending and the workspace is untouched.
func TestMillionFilesRefused(t *testing.T) {
	m, ws, root := setup(t, func(o *Options) { o.MaxFiles = 1000 })
	_, err := m.Run(context.Background(), sandbox.Request{Workspace: ws,
		Command: "mkdir d && cd d && i=0; while [ $i -lt 1000000 ]; do : > f$i || exit 1; i=$((i+1)); done"})
	if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "more files than a transaction holds (1000") {
		t.Fatalf("err = %v", err)
	}
	if m.Pending() != 0 {
		t.Fatal("a refused transaction is pending")
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("workspace has %d entries", len(ents))
	}
	m2, ws2, _ := setup(t, func(o *Options) { o.MaxBytes = 1 << 20 })
	_, err = m2.Run(context.Background(), sandbox.Request{Workspace: ws2, Command: "head -c 3000000 /dev/zero > big"})
	var ce *errcode.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "more bytes than a transaction holds") {
		t.Fatalf("bytes: %v", err)
	}
}

// TestNoChangeNoTransaction: a command that changes nothing leaves
// nothing pending.
func TestNoChangeNoTransaction(t *testing.T) {
	m, ws, _ := setup(t, nil)
	res := runTx(t, m, ws, "echo hi")
	if res.ID != "" || m.Pending() != 0 || string(res.Run.Stdout) != "hi\n" {
		t.Fatalf("%+v pending %d", res, m.Pending())
	}
}

// TestLeftoversCleared: a new manager removes what a dead daemon left in
// the transactions directory and leaves a live one's alone.
func TestLeftoversCleared(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "transactions")
	dead := filepath.Join(dir, "999999999", "abc")
	live := filepath.Join(dir, "1", "def") // pid 1 is alive
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := os.Stat(filepath.Dir(dead)); !os.IsNotExist(err) {
		t.Fatalf("a dead daemon's directory is left: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("a live daemon's directory is removed: %v", err)
	}
}

// TestTwoDaemonsOnOneStateDirectory: two daemons sharing one state
// directory whose pids are the same number (two containers' daemons, both
// pid 1; here two Managers of one process, which have one pid too) keep
// apart: the second's start leaves the first's pending transaction, which
// the first then applies; each has a directory of its own; and once the
// first has closed (its lock released) nothing of it is left.
func TestTwoDaemonsOnOneStateDirectory(t *testing.T) {
	m1, ws, root := setup(t, nil)
	res := runTx(t, m1, ws, "echo a > f")
	if res.ID == "" {
		t.Fatal("no transaction")
	}
	m2, err := New(Options{Executor: m1.opts.Executor, Dir: m1.opts.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if m1.dir == m2.dir {
		t.Fatalf("two daemons share the directory %s", m1.dir)
	}
	if _, err := m1.Apply(context.Background(), ws, res.ID); err != nil {
		t.Fatalf("the first daemon's transaction after the second's start: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "f")); err != nil || string(b) != "a\n" {
		t.Fatalf("f after apply: %q (%v)", b, err)
	}
	res2 := runTx(t, m2, ws, "echo b > g")
	m1.Close()
	if _, err := os.Lstat(m1.dir); !os.IsNotExist(err) {
		t.Fatalf("the first daemon's directory after its close: %v", err)
	}
	m3, err := New(Options{Executor: m1.opts.Executor, Dir: m1.opts.Dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m3.Close()
	if _, err := m2.Apply(context.Background(), ws, res2.ID); err != nil {
		t.Fatalf("the second daemon's transaction after a third's start: %v", err)
	}
}

// TestDeadDaemonsDirectoryCleared: a daemon's directory whose lock is no
// longer held (the daemon was killed: its descriptors closed) is removed
// by the next start, with what it held; a live one's stays.
func TestDeadDaemonsDirectoryCleared(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "transactions")
	live, err := sandbox.NewOverlayParent(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	liveTx, err := sandbox.NewOverlayDir(live.Dir, "abc")
	if err != nil {
		t.Fatal(err)
	}
	// A killed daemon's: its directory and lock file, the lock released.
	dead := filepath.Join(dir, "d-0123456789abcdef")
	if err := os.MkdirAll(filepath.Join(dead, "def"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, sandbox.OverlayLockFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := os.Lstat(dead); !os.IsNotExist(err) {
		t.Fatalf("a dead daemon's directory is left: %v", err)
	}
	if _, err := os.Stat(liveTx); err != nil {
		t.Fatalf("a live daemon's transaction directory is removed: %v", err)
	}
}

// TestSymlinkedTransactionsDirectoryRefused: a transactions directory
// that is a symlink stops the start, and nothing is made or removed where
// it leads.
func TestSymlinkedTransactionsDirectoryRefused(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "elsewhere")
	if err := os.MkdirAll(filepath.Join(target, "d-0123456789abcdef"), 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "transactions")
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	if m, err := New(Options{Dir: dir}); err == nil {
		m.Close()
		t.Fatal("a symlinked transactions directory was taken")
	}
	ents, err := os.ReadDir(target)
	if err != nil || len(ents) != 1 || ents[0].Name() != "d-0123456789abcdef" {
		t.Fatalf("where the link leads: %v (%v)", ents, err)
	}
}

// TestTransactionInSubdirectory: a transaction run in a working directory
// below the workspace's root sees the overlay there too, and its changes
// are named from the root.
func TestTransactionInSubdirectory(t *testing.T) {
	m, ws, root := setup(t, nil)
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := runTxIn(t, m, ws, filepath.Join(root, "sub"), "pwd && echo x > f")
	if string(res.Run.Stdout) != filepath.Join(root, "sub")+"\n" || len(res.Changes.Changes) != 1 || res.Changes.Changes[0].Path != "sub/f" {
		t.Fatalf("stdout %q changes %+v", res.Run.Stdout, res.Changes.Changes)
	}
	if _, err := os.Lstat(filepath.Join(root, "sub", "f")); !os.IsNotExist(err) {
		t.Fatal("written to the workspace")
	}
}

func runTxIn(t *testing.T, m *Manager, ws fsops.Workspace, dir, command string) Result {
	t.Helper()
	res, err := m.Run(context.Background(), sandbox.Request{Command: command, Workspace: ws, Dir: dir})
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return res
}

// TestConcurrentRunsBounded: transactions run at once count against
// --transaction-max-pending with the pending ones, so no more upper layers
// than that exist at any time; the others are refused naming the flag.
func TestConcurrentRunsBounded(t *testing.T) {
	m, ws, _ := setup(t, func(o *Options) { o.MaxPending = 2 })
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = m.Run(context.Background(), sandbox.Request{Command: "echo x > f" + strconv.Itoa(i), Workspace: ws})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !strings.Contains(err.Error(), "--transaction-max-pending 2"):
			t.Fatalf("unexpected refusal: %v", err)
		}
	}
	if ok > 2 || m.Pending() != ok {
		t.Fatalf("%d made, %d pending; at most 2", ok, m.Pending())
	}
}

// TestSparseFileRefused holds that a transaction is bounded by its files'
// apparent sizes, not only the blocks its tmpfs counts: `truncate -s 100G
// big` uses no block, yet transaction_apply would write 100 GB. It is
// refused naming --transaction-max-bytes, and nothing is pending.
func TestSparseFileRefused(t *testing.T) {
	m, ws, root := setup(t, func(o *Options) { o.MaxBytes = 1 << 20 })
	res, err := m.Run(context.Background(), sandbox.Request{Command: "truncate -s 100G big", Workspace: ws})
	if err == nil {
		t.Fatalf("transaction %s is pending with %d changes (big at 100 GB, the layer's bound 1 MiB)", res.ID, len(res.Changes.Changes))
	}
	if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "--transaction-max-bytes") || !strings.Contains(err.Error(), "big") {
		t.Fatalf("want TOO_LARGE naming --transaction-max-bytes and big, got %v", err)
	}
	if m.Pending() != 0 {
		t.Fatal("a refused transaction is pending")
	}
	if _, err := os.Stat(filepath.Join(root, "big")); !os.IsNotExist(err) {
		t.Fatalf("the workspace has big: %v", err)
	}
}

// TestRelativeDirNeverCleared holds that a relative transactions directory
// (from an empty or relative --state-dir) is refused before anything in it
// is removed: it would name the daemon's working directory's
// transactions/, often a project's own folder.
func TestRelativeDirNeverCleared(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	keep := filepath.Join(cwd, "transactions", "reports", "q3.csv")
	if err := os.MkdirAll(filepath.Dir(keep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("the user's data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{Dir: "transactions"})
	if err == nil {
		m.Close()
		t.Errorf("New accepted a relative transactions directory")
	} else if !strings.Contains(err.Error(), "absolute") {
		t.Errorf("the refusal does not say why: %v", err)
	}
	if _, serr := os.Stat(keep); serr != nil {
		t.Fatalf("New(Dir %q) (err %v) removed %s: %v", "transactions", err, keep, serr)
	}
}

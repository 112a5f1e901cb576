//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// helperCopy copies the built agentbe-sandbox into a fresh directory of
// the test's (0700) with mode perm, and returns its path.
func helperCopy(t *testing.T, perm os.FileMode) string {
	t.Helper()
	b, err := os.ReadFile(testbin.SandboxHelper(t))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), HelperName)
	if err := os.WriteFile(p, b, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

// openHelperT opens the helper at p as --sandbox-helper p does, closed at
// cleanup.
func openHelperT(t *testing.T, p string) *Trampoline {
	t.Helper()
	tr, err := OpenHelper(p, nil)
	if err != nil || tr == nil {
		t.Fatalf("OpenHelper(%s) = %v, %v", p, tr, err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// watchOpens counts, from now on, the times the kernel opens the file p
// (exec included, which opens the file it runs): the mark that a helper,
// not this test binary, was the trampoline.
func watchOpens(t *testing.T, p string) func() int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, p, unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	n := 0
	return func() int {
		buf := make([]byte, 64<<10)
		for {
			k, err := unix.Read(fd, buf)
			if err != nil || k <= 0 {
				return n
			}
			for off := 0; off+unix.SizeofInotifyEvent <= k; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&unix.IN_OPEN != 0 {
					n++
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}

// TestHelperIsTheTrampoline: with a helper set, a landlock command and a
// transaction's overlay run go through it (the kernel opens the helper's
// file for each), confined as through this program; without one, the
// helper is never opened (the control that makes the mark mean something).
func TestHelperIsTheTrampoline(t *testing.T) {
	p := helperCopy(t, 0o755)
	tr := openHelperT(t, p)
	ctx := context.Background()

	t.Run("landlock", func(t *testing.T) {
		if LandlockABI() < 1 {
			t.Skip("this kernel has no Landlock")
		}
		outside := t.TempDir()
		for _, withHelper := range []bool{true, false} {
			e, ws := newExec(t, ModeLandlock, func(c *Config) {
				if withHelper {
					c.Trampoline = tr
				}
			})
			opens := watchOpens(t, p)
			res, err := e.Run(ctx, Request{Command: "echo hi > f && cat f && touch " + outside + "/x"})
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != "hi\n" || res.ExitCode == 0 {
				t.Fatalf("helper=%v: exit %d stdout %q stderr %q (want hi, and the write outside refused)", withHelper, res.ExitCode, res.Stdout, res.Stderr)
			}
			if _, err := os.Stat(filepath.Join(ws, "f")); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(outside, "x")); !os.IsNotExist(err) {
				t.Fatalf("helper=%v: the command wrote outside its workspace: %v", withHelper, err)
			}
			if n := opens(); withHelper && n == 0 {
				t.Fatalf("the helper was not the trampoline (its file was never opened)")
			} else if !withHelper && n != 0 {
				t.Fatalf("without a helper set, the helper's file was opened %d times", n)
			}
		}
	})

	t.Run("overlay", func(t *testing.T) {
		defer func(v bool) { overlayByTrampoline = v }(overlayByTrampoline)
		overlayByTrampoline = true
		e, ws := newExec(t, ModeBwrap, func(c *Config) { c.Trampoline = tr })
		opens := watchOpens(t, p)
		overlayEdit(t, e, ws)
		if opens() == 0 {
			t.Fatal("the helper was not the overlay's trampoline (its file was never opened)")
		}
	})

	// A root daemon with --run-as: the trampoline runs as that user, who
	// execs the helper through the daemon's descriptor (no path to it: the
	// helper's directory is the test's, 0700).
	t.Run("overlay run-as", func(t *testing.T) {
		needBwrap(t)
		name := throwawayUser(t, "agoh")
		u, err := user.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		ws := testenv.SharedTempDir(t) // the user reaches and writes it, whatever TMPDIR is
		os.Chmod(ws, 0o777)
		e, err := New(Config{Mode: ModeBwrap, WorkspaceRoot: ws, RunAs: name, Trampoline: tr})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		opens := watchOpens(t, p)
		res, err := e.Run(ctx, Request{Command: "id -u && echo x > f", Overlay: &Overlay{Dir: testenv.SharedTempDir(t), MaxBytes: 1 << 20, MaxFiles: 10}})
		if err != nil {
			t.Fatal(err)
		}
		defer res.Upper.Close()
		if res.ExitCode != 0 || strings.TrimSpace(string(res.Stdout)) != u.Uid {
			t.Fatalf("exit %d stdout %q stderr %q; want uid %s", res.ExitCode, res.Stdout, res.Stderr, u.Uid)
		}
		if _, err := os.Stat(filepath.Join(ws, "f")); !os.IsNotExist(err) {
			t.Fatal("f written to the workspace")
		}
		if opens() == 0 {
			t.Fatal("the helper was not the --run-as overlay's trampoline (its file was never opened)")
		}
	})
}

// TestHelperSurvivesExtraFiles: os/exec's child moves a command's
// descriptors to 0..2+len(ExtraFiles) before it execs the helper by its
// descriptor; the helper's lies above all of them, so with many extra
// files the child still runs the helper (a descriptor among them would
// exec /dev/null instead), and past what trampolineFor allows it takes
// this program.
func TestHelperSurvivesExtraFiles(t *testing.T) {
	tr := openHelperT(t, helperCopy(t, 0o755))
	if fd := int(tr.f.Fd()); fd < minHelperFD {
		t.Fatalf("the helper is on descriptor %d, below %d", fd, minHelperFD)
	}
	e := &executor{cfg: Config{Trampoline: tr}}
	run := func(extra int) (*exec.Cmd, string) {
		var files []*os.File
		for range extra {
			f, err := os.Open(os.DevNull)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			files = append(files, f)
		}
		cmd := &exec.Cmd{ExtraFiles: files, Env: []string{}}
		cmd.Args = []string{e.trampolineFor(cmd), sandboxexec.Arg, sandboxexec.ProtocolArg}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%d extra files: %s: %v", extra, cmd.Path, err)
		}
		return cmd, strings.TrimSpace(string(out))
	}
	cmd, out := run(10)
	if cmd.Path != tr.path() || cmd.Args[0] != HelperName || out != sandboxexec.ProtocolLine() {
		t.Fatalf("10 extra files: ran %s (%s), answered %q", cmd.Path, cmd.Args[0], out)
	}
	cmd, out = run(60)
	if cmd.Path != "/proc/self/exe" || out != sandboxexec.ProtocolLine() {
		t.Fatalf("60 extra files: ran %s, answered %q (want this program)", cmd.Path, out)
	}
}

// TestHelperRefused: a helper anyone but its owner (root or the daemon's
// user) could have changed, or that is not a plain program, is refused
// naming why; beside the daemon (no flag) the refusal is a warning and the
// daemon is its own trampoline.
func TestHelperRefused(t *testing.T) {
	cases := []struct {
		name, want string
		make       func(t *testing.T) string
	}{
		{"group-writable", "writable by its group or others", func(t *testing.T) string { return helperCopy(t, 0o775) }},
		{"others-writable", "writable by its group or others", func(t *testing.T) string { return helperCopy(t, 0o757) }},
		{"setuid", "setuid or setgid", func(t *testing.T) string { return helperCopy(t, 0o755|os.ModeSetuid) }},
		{"not executable", "not executable", func(t *testing.T) string { return helperCopy(t, 0o644) }},
		{"directory", "not a regular file", func(t *testing.T) string { return t.TempDir() }},
		{"script", "not an ELF program", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), HelperName)
			if err := os.WriteFile(p, []byte("#!/bin/sh\necho agentbe-sandbox-protocol 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"directory writable by others", "writable by others", func(t *testing.T) string {
			p := helperCopy(t, 0o755)
			if err := os.Chmod(filepath.Dir(p), 0o777); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"another user's", "owned by uid 65534", func(t *testing.T) string {
			if os.Geteuid() != 0 {
				t.Skip("giving a file to another user needs root")
			}
			p := helperCopy(t, 0o755)
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"missing", "no such file", func(t *testing.T) string { return filepath.Join(t.TempDir(), HelperName) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.make(t)
			tr, err := OpenHelper(p, nil)
			if err == nil || tr != nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "--sandbox-helper "+p) {
				tr.Close()
				t.Fatalf("OpenHelper(%s) = %v, %v; want an error naming --sandbox-helper and %q", p, tr, err, c.want)
			}
			if c.name == "missing" || c.name == "directory" {
				return
			}
			// The same file beside the daemon: a warning, no helper.
			var logs bytes.Buffer
			self := func(string) {}
			tr, err = openHelperSetting("", filepath.Dir(p), slog.New(slog.NewTextHandler(&logs, nil)), self)
			if err != nil || tr != nil {
				tr.Close()
				t.Fatalf("beside the daemon: %v, %v; want no helper and no error", tr, err)
			}
			if !strings.Contains(logs.String(), "sandbox helper refused") || !strings.Contains(logs.String(), c.want) {
				t.Fatalf("beside the daemon, the log says:\n%s", logs.String())
			}
		})
	}
	if _, err := OpenHelper("agentbe-sandbox", nil); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("a relative --sandbox-helper: %v", err)
	}
	if tr, err := OpenHelper(HelperOff, nil); tr != nil || err != nil {
		t.Fatalf("--sandbox-helper off: %v, %v", tr, err)
	}
	if tr, err := openHelperSetting("", t.TempDir(), slog.New(slog.DiscardHandler), func(string) {}); tr != nil || err != nil {
		t.Fatalf("no helper beside the daemon: %v, %v", tr, err)
	}
}

// TestHelperSwappedAfterValidation: the helper is started through the
// descriptor opened at start, never by its name: a symlink pointed
// elsewhere afterwards (here at a file that would answer another
// protocol) changes nothing.
func TestHelperSwappedAfterValidation(t *testing.T) {
	real := helperCopy(t, 0o755)
	dir := t.TempDir()
	link := filepath.Join(dir, HelperName)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	tr := openHelperT(t, link)
	evil := filepath.Join(dir, "evil")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\necho agentbe-sandbox-protocol 99\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(evil, filepath.Join(dir, "tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "tmp"), link); err != nil {
		t.Fatal(err)
	}
	if got, err := tr.protocol(); err != nil || got != sandboxexec.Protocol {
		t.Fatalf("after the swap the helper answers %d, %v; want %d (the file validated at start)", got, err, sandboxexec.Protocol)
	}
	if LandlockABI() >= 1 {
		e, _ := newExec(t, ModeLandlock, func(c *Config) { c.Trampoline = tr })
		opens := watchOpens(t, real)
		res, err := e.Run(context.Background(), Request{Command: "echo ok"})
		if err != nil || string(res.Stdout) != "ok\n" || opens() == 0 {
			t.Fatalf("after the swap: %v, stdout %q stderr %q, validated file opened %d times", err, res.Stdout, res.Stderr, opens())
		}
	}
}

// TestHelperStaleProtocol: a helper that does not answer this daemon's
// protocol (one from an older install, which knows no --protocol) is
// passed over, with a warning naming its path and both versions, and the
// daemon is its own trampoline.
func TestHelperStaleProtocol(t *testing.T) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true program to play an old helper")
	}
	src, err := os.Open(truePath)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	old := filepath.Join(t.TempDir(), HelperName)
	dst, err := os.OpenFile(old, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	for _, setting := range []string{old, ""} {
		var logs bytes.Buffer
		log := slog.New(slog.NewTextHandler(&logs, nil))
		var why string
		tr, err := openHelperSetting(setting, filepath.Dir(old), log, func(w string) { why = w })
		if err != nil || tr != nil {
			tr.Close()
			t.Fatalf("setting %q: %v, %v; want no helper and no error", setting, tr, err)
		}
		s := logs.String()
		for _, want := range []string{"speaks another protocol", "path=" + old, "helper_protocol=none", "daemon_protocol=" + strconv.Itoa(sandboxexec.Protocol)} {
			if !strings.Contains(s, want) {
				t.Fatalf("setting %q: the log lacks %q:\n%s", setting, want, s)
			}
		}
		if !strings.Contains(why, "speaks protocol none, this daemon 1") {
			t.Fatalf("setting %q: the trampoline's reason is %q", setting, why)
		}
	}
}

// BenchmarkRunLandlockTrampoline: a landlock-mode `true` through each
// trampoline, alternating in one loop: this test binary (self), the
// agent-backend binary (what a daemon without the helper starts) and
// agentbe-sandbox (helper). Per command: each one's ms, and the helper's
// saving against agent-backend (docs/performance.md).
func BenchmarkRunLandlockTrampoline(b *testing.B) {
	if LandlockABI() < 1 {
		b.Skip("this kernel has no Landlock")
	}
	open := func(p string) *Trampoline {
		t, err := OpenHelper(p, nil)
		if err != nil || t == nil {
			b.Fatalf("%s as the trampoline: %v", p, err)
		}
		b.Cleanup(func() { t.Close() })
		return t
	}
	names := []string{"self", "agent-backend", "helper"}
	tramps := []*Trampoline{nil, open(testbin.Path(b)), open(testbin.SandboxHelper(b))}
	ws := mustReal(b, b.TempDir())
	exs := make([]Executor, len(tramps))
	for i, t := range tramps {
		e, err := New(Config{Mode: ModeLandlock, WorkspaceRoot: ws, Trampoline: t})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		exs[i] = e
	}
	ctx := context.Background()
	took := make([]time.Duration, len(exs))
	n := 0
	for b.Loop() {
		for i, e := range exs {
			t0 := time.Now()
			res, err := e.Run(ctx, Request{Command: "true"})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("%s: %v %+v", names[i], err, res)
			}
			took[i] += time.Since(t0)
		}
		n++
	}
	for i, name := range names {
		b.ReportMetric(float64(took[i])/float64(n)/1e6, name+"-ms")
	}
	b.ReportMetric(float64(took[2])/float64(took[1]), "helper/agent-backend")
}

// helperWithoutTrampoline is the role of a program whose main does not
// call sandboxexec.Main but is given a helper: the landlock mode works
// there, through the helper alone.
const helperWithoutTrampoline = "helper-without-trampoline"

func init() {
	testRoles[helperWithoutTrampoline] = func() int {
		if sandboxexec.Ready() {
			fmt.Println("this program is the trampoline: the role proves nothing")
			return 1
		}
		tr, err := OpenHelper(os.Getenv("HELPER"), nil)
		if err != nil {
			fmt.Printf("helper=%v\n", err)
			return 1
		}
		defer tr.Close()
		e, err := New(Config{Mode: ModeLandlock, WorkspaceRoot: os.Getenv("WS"), Trampoline: tr})
		if err != nil {
			fmt.Printf("landlock=%v\n", err)
			return 1
		}
		defer e.Close()
		res, err := e.Run(context.Background(), Request{Command: "echo confined"})
		fmt.Printf("landlock=%v %q %d\n", err, res.Stdout, res.ExitCode)
		return 0
	}
}

// TestHelperMakesLandlockAvailable: where this program is not the
// trampoline (TestLandlockNeedsTrampoline: landlock refused), a helper
// makes the landlock mode available, and its commands run.
func TestHelperMakesLandlockAvailable(t *testing.T) {
	if LandlockABI() < 1 {
		t.Skip("this kernel has no Landlock")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), testRoleEnv+"="+helperWithoutTrampoline, "WS="+workspace(t), "HELPER="+helperCopy(t, 0o755))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `landlock=<nil> "confined\n" 0`) {
		t.Fatalf("%v\n%s", err, out)
	}
}

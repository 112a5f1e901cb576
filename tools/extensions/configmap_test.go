package extensions

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// cmExt is an extension whose tool answers its version and what it
// load()s from lib.star.
func cmExt(version string) string {
	return "load('lib.star', 'lib')\ndef h(p):\n    return '" + version + " ' + lib\n" +
		"def describe_extension():\n    return Extension(name='cm', tools=[Tool(name='t', handler=h)])\n"
}

// cmLib is lib.star, which cm.star load()s: an extension of no tools.
func cmLib(v string) string {
	return "lib = '" + v + "'\ndef describe_extension():\n    return Extension(name='lib', tools=[])\n"
}

const cmGone = "def h(p):\n    return 'here'\ndef describe_extension():\n    return Extension(name='gone', tools=[Tool(name='t', handler=h)])\n"

// TestConfigMapVolume: extensions mounted as the kubelet mounts a
// ConfigMap (each file a symlink through ..data into a timestamped
// directory, the mount point 1777) pass CheckDir and serve, load()
// included; an update (a new timestamped directory, ..data swapped) is
// served once the watcher sees the swap (the provider polls only without
// a watcher), a key dropped withdraws its tools, a version that fails to
// load keeps the last good one serving, and the next good one serves.
func TestConfigMapVolume(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{"cm.star": cmExt("v1"), "lib.star": cmLib("lib1"), "gone.star": cmGone})
	if err := CheckDir(vol); err != nil {
		t.Fatalf("CheckDir of a ConfigMap volume: %v", err)
	}
	f := startIn(t, vol, nil)
	if f.p.watcher == nil {
		t.Fatal("no watcher: the test is of the watcher's reload")
	}
	if txt, isErr, _ := f.call(t, "cm__t", `{}`); isErr || txt != "v1 lib1" {
		t.Fatalf("cm__t from the ConfigMap: %q %v (%+v)", txt, isErr, f.p.Health())
	}
	if txt, _, _ := f.call(t, "gone__t", `{}`); txt != "here" {
		t.Fatalf("gone__t: %q", txt)
	}

	testenv.ConfigMapUpdate(t, vol, map[string]string{"cm.star": cmExt("v2"), "lib.star": cmLib("lib2")})
	waitFor(t, "v2 served after the ..data swap", func() bool { txt, _, _ := f.call(t, "cm__t", `{}`); return txt == "v2 lib2" })
	waitFor(t, "the dropped key's tools withdrawn", func() bool { _, ok := f.reg.Lookup("gone__t"); return !ok })

	testenv.ConfigMapUpdate(t, vol, map[string]string{"cm.star": "def describe_extension(:\n", "lib.star": cmLib("lib2")})
	waitFor(t, "the failed version in Health", func() bool {
		for _, h := range f.p.Health() {
			if h.File == "cm.star" {
				return h.State == "failed" && strings.Contains(h.LastError, "cm.star:1:")
			}
		}
		return false
	})
	if txt, _, _ := f.call(t, "cm__t", `{}`); txt != "v2 lib2" {
		t.Errorf("the last good version after a failed update: %q", txt)
	}

	testenv.ConfigMapUpdate(t, vol, map[string]string{"cm.star": cmExt("v3"), "lib.star": cmLib("lib3")})
	waitFor(t, "v3 served", func() bool { txt, _, _ := f.call(t, "cm__t", `{}`); return txt == "v3 lib3" })
	if errs, tools, err := Check(vol); err != nil || len(errs) != 0 || tools != 1 {
		t.Errorf("ext check of the ConfigMap volume: %v, %d tools, %v", errs, tools, err)
	}
}

// TestConfigMapLinkInPlaceEdit: a link to a file in a directory inside
// the extensions directory (not a ConfigMap's: one edited in place) is
// followed, and an edit there is seen through the watcher.
func TestConfigMapLinkInPlaceEdit(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "lib.star", cmLib("lib"))
	write(t, filepath.Join(dir, "src"), "cm.star", cmExt("v1"))
	if err := os.Symlink("src/cm.star", filepath.Join(dir, "cm.star")); err != nil {
		t.Fatal(err)
	}
	f := startIn(t, dir, nil)
	if txt, _, _ := f.call(t, "cm__t", `{}`); txt != "v1 lib" {
		t.Fatalf("through a link inside: %q (%+v)", txt, f.p.Health())
	}
	write(t, filepath.Join(dir, "src"), "cm.star", cmExt("v2"))
	waitFor(t, "the edit behind the link served", func() bool { txt, _, _ := f.call(t, "cm__t", `{}`); return txt == "v2 lib" })
}

// logBuf is a log the provider writes from its goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestConfigMapLinkOutRefused: a *.star link that leads out of the
// directory, to a FIFO, or round in a loop fails CheckDir (the start and
// --check-config) naming it and where it leads; one added later is
// refused with a warning that says so, and never loads; a ..data swapped
// to a directory outside refuses every file through it, the last good
// version serving; a *_test.star link out fails `ext test`.
func TestConfigMapLinkOutRefused(t *testing.T) {
	top := t.TempDir()
	outside := filepath.Join(top, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, outside, "out.star", cmGone)
	write(t, outside, "cm.star", cmExt("evil"))
	write(t, outside, "lib.star", cmLib("evil"))
	vol := filepath.Join(top, "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{"cm.star": cmExt("v1"), "lib.star": cmLib("lib1")})
	data, err := os.Readlink(filepath.Join(vol, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.FIFO(t, filepath.Join(vol, data, "pipe.star"), "x = 1\n")
	links := map[string]string{
		"out.star":  "../outside/out.star",
		"pipe.star": "..data/pipe.star",
		"loop.star": "loop.star",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	err = CheckDir(vol)
	for name, want := range map[string]string{
		"out.star":  " (a symlink to ../outside/out.star) leads to " + filepath.Join(outside, "out.star") + ": not a file inside the extensions directory",
		"pipe.star": " (a symlink to ..data/pipe.star) leads to " + filepath.Join(vol, data, "pipe.star") + ", a FIFO, not a regular file: refused",
		"loop.star": ": too many levels of symbolic links",
	} {
		if err == nil || !strings.Contains(err.Error(), filepath.Join(vol, name)+want) {
			t.Errorf("CheckDir: %v; want it to say %s%s", err, name, want)
		}
	}
	if p, err := Start(Options{Dir: vol, Registry: registry.New(registry.Options{})}); err == nil {
		p.Close()
		t.Fatal("Start with a link out of the directory")
	}

	// Added after the start: refused at the reload, with a warning.
	for name := range links {
		if err := os.Remove(filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	var log logBuf
	f := startIn(t, vol, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	if txt, _, _ := f.call(t, "cm__t", `{}`); txt != "v1 lib1" {
		t.Fatalf("cm__t: %q (%+v)", txt, f.p.Health())
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the three links refused in Health", func() bool {
		n := 0
		for _, h := range f.p.Health() {
			if links[h.File] != "" && h.State == "failed" && strings.Contains(h.LastError, "(a symlink to "+links[h.File]+")") {
				n++
			}
		}
		return n == 3
	})
	if _, ok := f.reg.Lookup("gone__t"); ok {
		t.Error("the extension outside the directory serves its tools")
	}
	if l := log.String(); !strings.Contains(l, "a symlink not followed") || !strings.Contains(l, filepath.Join(outside, "out.star")) {
		t.Errorf("no warning naming the link out and where it leads:\n%s", l)
	}

	// ..data swapped to a directory outside: cm.star and lib.star lead
	// out; the last good version serves, and the failure says why.
	if err := os.Symlink(outside, filepath.Join(vol, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(vol, "..data_tmp"), filepath.Join(vol, "..data")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "cm.star refused through ..data", func() bool {
		for _, h := range f.p.Health() {
			if h.File == "cm.star" {
				return h.State == "failed" && strings.Contains(h.LastError, filepath.Join(outside, "cm.star")+": not a file inside the extensions directory")
			}
		}
		return false
	})
	if txt, _, _ := f.call(t, "cm__t", `{}`); txt != "v1 lib1" {
		t.Errorf("after ..data led out: %q; want the last good version", txt)
	}
	if err := CheckDir(vol); err == nil || !strings.Contains(err.Error(), filepath.Join(outside, "cm.star")) {
		t.Errorf("CheckDir with ..data outside: %v", err)
	}

	// `ext test`: a test file through a link out is a failure that says so.
	tdir := t.TempDir()
	write(t, tdir, "ok_test.star", "def test_ok():\n    testing.eq(1, 1)\n")
	if err := os.Symlink(filepath.Join(outside, "out.star"), filepath.Join(tdir, "out_test.star")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ok, err := RunTests(context.Background(), TestOptions{Dir: tdir, Out: &out})
	if err != nil || ok || !strings.Contains(out.String(), "--- FAIL: out_test.star") || !strings.Contains(out.String(), "not a file inside the extensions directory") {
		t.Errorf("ext test with a test file leading out: %v %v\n%s", ok, err, out.String())
	}
}

// TestConfigMapExtTest: `ext test` runs the *_test.star files of a
// ConfigMap volume, with the extension they go with.
func TestConfigMapExtTest(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{
		"cm.star":      cmExt("v1"),
		"lib.star":     cmLib("lib1"),
		"cm_test.star": "load('cm.star', 'h')\ndef test_h():\n    testing.eq(h({}), 'v1 lib1')\n",
	})
	var out bytes.Buffer
	ok, err := RunTests(context.Background(), TestOptions{Dir: vol, Out: &out, Verbose: true})
	if err != nil || !ok || !strings.Contains(out.String(), "--- PASS: cm_test.star:test_h") {
		t.Errorf("ext test of a ConfigMap volume: %v %v\n%s", ok, err, out.String())
	}
}

// TestConfigMapVolumeMountPoint: the mount point of a `configMap:` volume
// is the kubelet's disk-backed emptyDir, mode 0777 without the sticky
// bit, where any user could replace ..data: the directory is refused,
// naming it and the mode. A `projected:` volume (with a configMap
// source) or a Secret is a tmpfs, whose mount point is 1777: accepted
// (docs/extensions.md, From a ConfigMap).
func TestConfigMapVolumeMountPoint(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{"cm.star": cmExt("v1"), "lib.star": cmLib("lib1")})
	if err := CheckDir(vol); err != nil {
		t.Fatalf("a projected volume's layout (mount point 1777): %v", err)
	}
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(vol); err == nil || !strings.Contains(err.Error(), "lies in "+vol+", which its group or others may write (mode 0777, others may write it) without the sticky bit") {
		t.Fatalf("a configMap volume's mount point (0777): %v", err)
	}
}

// TestConfigMapPlantedLinkRefused: in the volume's sticky mount point
// another user may add names of their own, not replace the kubelet's: a
// link of theirs to a file of the ConfigMap (root's, inside the
// directory) is refused by its owner, at the start and at a reload,
// though the file it leads to would pass. A link to a device inside the
// directory is refused as not a regular file, never opened.
func TestConfigMapPlantedLinkRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a link to another user (CI runs as root)")
	}
	vol := filepath.Join(t.TempDir(), "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{"cm.star": cmExt("v1"), "lib.star": cmLib("lib1")})
	planted := filepath.Join(vol, "planted.star")
	if err := os.Symlink("..data/cm.star", planted); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(planted, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := CheckDir(vol); err == nil || !strings.Contains(err.Error(), "a symlink on its path, "+planted+", is owned by uid 65534") {
		t.Fatalf("CheckDir with a link another user planted: %v", err)
	}
	if err := os.Remove(planted); err != nil {
		t.Fatal(err)
	}
	f := startIn(t, vol, nil)
	if err := os.Symlink("..data/cm.star", planted); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(planted, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the planted link refused", func() bool {
		for _, h := range f.p.Health() {
			if h.File == "planted.star" {
				return h.State == "failed" && strings.Contains(h.LastError, "is owned by uid 65534")
			}
		}
		return false
	})
	data, err := os.Readlink(filepath.Join(vol, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(vol, data, "null.star")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o644, 1<<8|3); err != nil {
		t.Skipf("mknod: %v", err)
	}
	if err := os.Symlink("..data/null.star", filepath.Join(vol, "null.star")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the link to a device refused", func() bool {
		for _, h := range f.p.Health() {
			if h.File == "null.star" {
				return h.State == "failed" && strings.Contains(h.LastError, "leads to "+dev+", a character device, not a regular file: refused")
			}
		}
		return false
	})
}

// TestReloadUnderEndlessChanges: changes that never pause (a file of the
// directory written over and over: in a sticky directory, another user's)
// postpone a reload by a bounded time, not for ever: an edit made while
// they go on is served.
func TestReloadUnderEndlessChanges(t *testing.T) {
	// A debounce far longer than the pause between two writes.
	f := start(t, map[string]string{"cm.star": cmExt("v1"), "lib.star": cmLib("lib1")}, func(o *Options) { o.Debounce = 300 * time.Millisecond })
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		noise := filepath.Join(f.dir, "noise.txt")
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := os.WriteFile(noise, []byte("x"), 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()
	write(t, f.dir, "cm.star", cmExt("v2"))
	waitFor(t, "v2 while the directory keeps changing", func() bool { txt, _, _ := f.call(t, "cm__t", `{}`); return txt == "v2 lib1" })
}

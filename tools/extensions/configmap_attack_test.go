package extensions

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// plantLink makes, in a ConfigMap volume's sticky mount point, a link of
// uid 65534's (another user) named name to target.
func plantLink(t *testing.T, vol, name, target string) string {
	t.Helper()
	p := filepath.Join(vol, name)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigMapPlantedLinkGoneBeforeTheRead: another user's link in the
// sticky mount point, to the ConfigMap's own file, present when the name
// is resolved and taken away before it is judged, loads nothing: the
// name's way is judged on the walk that reads the file, so the name is
// missing there, not judged missing and then read where it led.
func TestConfigMapPlantedLinkGoneBeforeTheRead(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a link to another user (CI runs as root)")
	}
	vol := filepath.Join(t.TempDir(), "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{"cm.star": cmExt("v1"), "lib.star": cmLib("lib1")})
	planted := plantLink(t, vol, "planted.star", "..data/cm.star")
	afterResolve = func(rel string) {
		if rel == "planted.star" {
			os.Remove(planted)
		}
	}
	defer func() { afterResolve = nil }()
	if src, err := readSource(vol, "planted.star"); err == nil {
		t.Fatalf("a link another user planted, gone after it was resolved, read %d bytes of the file it led to; want no file", len(src))
	}
}

// TestConfigMapLinksIntoOthersDirectoriesNotWatched: links another user
// plants in the sticky mount point, each into a directory of theirs
// inside the volume, are refused, and the provider adds no watch for
// those directories: the watches links lead it to add are bounded by the
// directories root or the daemon's user made there (the kubelet's
// timestamped one), not by what another user makes.
func TestConfigMapLinksIntoOthersDirectoriesNotWatched(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give files to another user (CI runs as root)")
	}
	vol := filepath.Join(t.TempDir(), "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{"cm.star": cmExt("v1"), "lib.star": cmLib("lib1")})
	f := startIn(t, vol, nil)
	if f.p.watcher == nil {
		t.Skip("no watcher")
	}
	var theirs []string
	for _, n := range []string{"e1", "e2", "e3"} {
		d := filepath.Join(vol, n)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, d, "x.star", cmGone)
		for _, p := range []string{d, filepath.Join(d, "x.star")} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		plantLink(t, vol, n+".star", n+"/x.star")
		theirs = append(theirs, d)
	}
	waitFor(t, "the planted links refused", func() bool {
		refused := 0
		for _, h := range f.p.Health() {
			if strings.HasPrefix(h.File, "e") && h.State == "failed" {
				refused++
			}
		}
		return refused == len(theirs)
	})
	f.p.Close() // the reload that refused them has ended, watches added
	kubelet, err := filepath.EvalSymlinks(filepath.Join(vol, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	if !f.p.watched[kubelet] {
		t.Errorf("the kubelet's timestamped directory %s is not watched: %v", kubelet, f.p.watched)
	}
	for _, d := range theirs {
		if f.p.watched[d] {
			t.Errorf("the provider watches %s, another user's directory a planted link leads into", d)
		}
	}
}

// TestConfigMapLinkToTheDirectoryRefused: a *.star link to the
// extensions directory itself (relative or absolute), to its parent, or
// to the kubelet's ..data (a directory) is refused by CheckDir naming it,
// and read as nothing.
func TestConfigMapLinkToTheDirectoryRefused(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{"cm.star": cmExt("v1"), "lib.star": cmLib("lib1")})
	for name, target := range map[string]string{"self.star": ".", "abs.star": vol, "up.star": "..", "data.star": "..data"} {
		if err := os.Symlink(target, filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	err := CheckDir(vol)
	for _, name := range []string{"self.star", "abs.star", "up.star", "data.star"} {
		if err == nil || !strings.Contains(err.Error(), filepath.Join(vol, name)+" (a symlink to ") {
			t.Errorf("CheckDir: %v; want it to refuse %s", err, name)
		}
		if src, rerr := readSource(vol, name); rerr == nil {
			t.Errorf("readSource(%s) read %d bytes", name, len(src))
		}
	}
}

// extNamed is an extension named name whose tool t answers version.
func extNamed(name, version string) string {
	return "def h(p):\n    return '" + version + "'\ndef describe_extension():\n    return Extension(name='" + name + "', tools=[Tool(name='t', handler=h)])\n"
}

// TestConfigMapSwapMidReload: a ..data swap in the middle of a reload
// serves, until the next reload, the files read before it at the old
// version and those read after it at the new (two versions at once,
// each extension whole); the next reload, which the swap's own events
// bring (TestConfigMapVolume), serves the new version of every file.
// The debounce is long, so that no reload but the test's comes between.
func TestConfigMapSwapMidReload(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{"a.star": extNamed("a", "v1"), "b.star": extNamed("b", "v1")})
	var once sync.Once
	afterResolve = func(rel string) {
		if rel == "b.star" {
			once.Do(func() {
				testenv.ConfigMapUpdate(t, vol, map[string]string{"a.star": extNamed("a", "v2"), "b.star": extNamed("b", "v2")})
			})
		}
	}
	defer func() { afterResolve = nil }()
	f := startIn(t, vol, func(o *Options) { o.Debounce = time.Hour })
	a, _, _ := f.call(t, "a__t", `{}`)
	b, _, _ := f.call(t, "b__t", `{}`)
	if a != "v1" || b != "v2" {
		t.Fatalf("after the reload the swap cut in two: a %q, b %q; want a at v1 (read before it), b at v2", a, b)
	}
	f.p.reload()
	a, _, _ = f.call(t, "a__t", `{}`)
	b, _, _ = f.call(t, "b__t", `{}`)
	if a != "v2" || b != "v2" {
		t.Fatalf("after the next reload: a %q, b %q; want both at v2", a, b)
	}
}

// TestConfigMapLinkTargetCannotForgeALogLine: a link refused for where it
// leads, whose target holds a newline, an escape and a byte that is not
// UTF-8, is logged with them escaped (the log handler quotes the value):
// no line of the log is one the target wrote.
func TestConfigMapLinkTargetCannotForgeALogLine(t *testing.T) {
	top := t.TempDir()
	outside := filepath.Join(top, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	forged := "x\nlevel=INFO msg=\"extension loaded\" file=forged.star\x1b[2K\xff.star"
	write(t, outside, forged, cmGone)
	vol := filepath.Join(top, "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{"cm.star": cmExt("v1"), "lib.star": cmLib("lib1")})
	var log logBuf
	f := startIn(t, vol, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	if err := os.Symlink(filepath.Join("..", "outside", forged), filepath.Join(vol, "evil.star")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the link out refused", func() bool { return strings.Contains(log.String(), "a symlink not followed") })
	for _, line := range strings.Split(log.String(), "\n") {
		if strings.HasPrefix(line, "level=INFO msg=\"extension loaded\" file=forged.star") || strings.Contains(line, "\x1b") || strings.Contains(line, "\xff") {
			t.Errorf("a log line the link's target wrote: %q", line)
		}
	}
	for _, h := range f.p.Health() {
		if h.File == "evil.star" && !strings.Contains(h.LastError, "leads to") {
			t.Errorf("evil.star: %+v", h)
		}
	}
}

// TestConfigMapLinkThroughOthersDirectoryRefused: a link whose resolved
// file is the ConfigMap's own, inside the directory, but whose way passes
// through a directory others may write (0777, no sticky bit) or one
// another user owns (w/../..data/cm.star: the kernel goes through w) is
// refused, by CheckDir and by the read: the way is judged, not only
// where it ends.
func TestConfigMapLinkThroughOthersDirectoryRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a directory to another user (CI runs as root)")
	}
	vol := filepath.Join(t.TempDir(), "extensions")
	testenv.ConfigMapVolume(t, vol, map[string]string{"cm.star": cmExt("v1"), "lib.star": cmLib("lib1")})
	open, theirs := filepath.Join(vol, "open"), filepath.Join(vol, "theirs")
	for _, d := range []string{open, theirs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"via-open.star":   "lies in " + open + ", which its group or others may write",
		"via-theirs.star": "a directory on its path, " + theirs + ", is owned by uid 65534",
	}
	for name, d := range map[string]string{"via-open.star": "open", "via-theirs.star": "theirs"} {
		if err := os.Symlink(d+"/../..data/cm.star", filepath.Join(vol, name)); err != nil {
			t.Fatal(err)
		}
	}
	err := CheckDir(vol)
	for name, msg := range want {
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("CheckDir: %v; want %s refused: %s", err, name, msg)
		}
		if _, rerr := readSource(vol, name); rerr == nil || !strings.Contains(rerr.Error(), msg) {
			t.Errorf("readSource(%s): %v; want %s", name, rerr, msg)
		}
	}
}

package fsops

import (
	"testing"
	"time"
)

// The openat2 read path reads inside files itself and leaves every escaping
// or unusual path to the os.Root path (which reports the error).
func TestReadFastConfined(t *testing.T) {
	fx := newEscapeFixture(t)
	w := fx.ws.(*dirWS)
	if _, _, ok := w.readFast("data/f.txt", 1<<20); !ok {
		if openat2Missing.Load() {
			t.Skip("openat2 is not supported here; reads take the os.Root path")
		}
		t.Fatal("fast path refused an inside file")
	}
	for _, rel := range []string{"in_rel/f.txt", "in_file", "deep/in_up"} {
		if data, _, ok := w.readFast(rel, 1<<20); !ok || string(data) != "INSIDE\n" {
			t.Errorf("readFast(%q) = %q, %v", rel, data, ok)
		}
	}
	for _, rel := range []string{"out_rel/secret.txt", "out_file_abs", "out_rel_file", "chain1/secret.txt", "deep/dot_chain/secret.txt", "in_abs/f.txt", "data", "missing"} {
		if data, _, ok := w.readFast(rel, 1<<20); ok {
			t.Errorf("readFast(%q) read %q; must defer to os.Root", rel, data)
		}
	}
	if _, size, ok := w.readFast("data/f.txt", 3); !ok || size != 7 {
		t.Errorf("over max: size %d ok %v", size, ok)
	}
}

// statFast (openat2 + statx) must describe a path exactly as the os.Root
// stat does, links and directories included, and never stat outside.
func TestStatFastMatchesRoot(t *testing.T) {
	fx := newEscapeFixture(t)
	w := fx.ws.(*dirWS)
	r, err := w.handle(false)
	must(t, err)
	for _, rel := range []string{".", "data", "data/f.txt", "in_rel", "in_file", "deep/in_up"} {
		for _, follow := range []bool{true, false} {
			fast, ok := w.statFast(rel, follow)
			if !ok {
				if openat2Missing.Load() {
					t.Skip("openat2 is not supported here")
				}
				t.Fatalf("statFast(%q, %v) refused", rel, follow)
			}
			stat := r.Stat
			if !follow {
				stat = r.Lstat
			}
			fi, err := stat(rel)
			must(t, err)
			slow := infoFrom(rel, fi)
			fast.BirthTime = time.Time{}
			if fast.Mode != slow.Mode || fast.Size != slow.Size || !fast.ModTime.Equal(slow.ModTime) ||
				fast.UID != slow.UID || fast.Nlink != slow.Nlink || fast.dev != slow.dev || fast.ino != slow.ino || fast.Name != slow.Name {
				t.Errorf("%q follow=%v:\nfast %+v\nslow %+v", rel, follow, fast, slow)
			}
		}
	}
	for _, rel := range []string{"out_rel/secret.txt", "out_file_abs", "chain1/secret.txt", "in_abs/f.txt", "missing"} {
		if info, ok := w.statFast(rel, true); ok {
			t.Errorf("statFast(%q) = %+v; must defer to os.Root", rel, info)
		}
	}
	info, err := fx.ws.Stat("data/f.txt")
	must(t, err)
	t.Logf("birth time reported: %v", info.BirthTime)
}

package fsops

import "testing"

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

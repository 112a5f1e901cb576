package checkpoint

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestManifestHashNamingAnotherFileOfTheStore: a hand in the state
// directory rewrites a manifest so that an entry's hash names another file
// of the store ("../manifests/<id>.json", with that file's size), for the
// store to count it as a blob and, on the checkpoint's prune, remove the
// other checkpoint's manifest. Blobs are what blobs/ lists: the checkpoint
// is left out at the next start, and the other checkpoint stays whole and
// restores, through later prunes too.
func TestManifestHashNamingAnotherFileOfTheStore(t *testing.T) {
	f := newFixture(t, func(o *Options) { o.MaxCount = 2 })
	f.write(t, "a.txt", "one\n")
	c1 := f.create(t, "")
	f.write(t, "a.txt", "two\n")
	c2 := f.create(t, "")
	victim := filepath.Join(f.storeDir, manifestsDir, c2.ID+manifestExt)
	vi, err := os.Stat(victim)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.storeDir, manifestsDir, c1.ID+manifestExt)
	var m map[string]any
	b, _ := os.ReadFile(p)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, e := range m["entries"].([]any) {
		if e := e.(map[string]any); e["h"] != nil {
			e["h"] = "../" + manifestsDir + "/" + c2.ID + manifestExt
			e["s"] = vi.Size()
		}
	}
	b, _ = json.Marshal(m)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f.reopen(t)
	for _, c := range f.st.List(f.ws) {
		if c.ID == c1.ID {
			t.Fatalf("the manifest whose hash names another file of the store is listed")
		}
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("the other checkpoint's manifest: %v", err)
	}
	if _, err := f.st.Restore(context.Background(), f.ws, c2.ID, nil); err != nil {
		t.Fatalf("restore of the other checkpoint: %v", err)
	}
	f.write(t, "a.txt", "three\n")
	f.create(t, "")
	f.write(t, "a.txt", "four\n")
	f.create(t, "") // prunes down to 2: c2 goes now, through release
	f.reopen(t)
	if _, err := f.st.Restore(context.Background(), f.ws, f.st.List(f.ws)[0].ID, nil); err != nil {
		t.Fatalf("restore after the planted manifest and the prunes: %v", err)
	}
}

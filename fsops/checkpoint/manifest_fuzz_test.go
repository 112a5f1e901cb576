package checkpoint

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// normal is m with empty and absent lists alike (deleted and skipped are
// omitted empty, entries written [] when none) and its time in UTC (a time
// is its instant, whatever zone wrote it).
func normal(m *Manifest) {
	if len(m.Entries) == 0 {
		m.Entries = nil
	}
	if len(m.Deleted) == 0 {
		m.Deleted = nil
	}
	if len(m.Skipped) == 0 {
		m.Skipped = nil
	}
	m.Created = m.Created.UTC()
}

// FuzzReadManifest: a manifest file, whatever a hand in the store or a
// power cut left in it, is taken only when it is JSON that names itself
// by its file's name with its entries and deletions sorted by path; and
// what is taken, written again as the store writes manifests
// (encodeManifest), reads back the same.
func FuzzReadManifest(f *testing.F) {
	base := f.TempDir()
	wsDir, storeDir := filepath.Join(base, "ws"), filepath.Join(base, "state")
	if err := os.MkdirAll(filepath.Join(wsDir, "d"), 0o755); err != nil {
		f.Fatal(err)
	}
	for name, body := range map[string]string{"a.txt": "one\n", "d/b.txt": "two\n", "é ü.txt": "three\n"} {
		if err := os.WriteFile(filepath.Join(wsDir, name), []byte(body), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	ws, err := fsops.NewDir(wsDir, fsops.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer ws.Close()
	st, err := Open(Options{Dir: storeDir, WorkspaceRoot: wsDir})
	if err != nil {
		f.Fatal(err)
	}
	defer st.Close()
	const id = "fuzz"
	for _, label := range []string{"", "first \"label\"\n"} {
		c, err := st.Create(context.Background(), ws, CreateOptions{Label: label})
		if err != nil {
			f.Fatal(err)
		}
		m, _, err := st.readManifestFile(c.ID)
		if err != nil {
			f.Fatal(err)
		}
		m.ID = id
		b, err := encodeManifest(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		os.WriteFile(filepath.Join(wsDir, "a.txt"), []byte("changed\n"), 0o644)
	}
	f.Add([]byte(`{"id":"fuzz","entries":[{"p":"b"},{"p":"a"}]}`))
	f.Add([]byte(`{"id":"fuzz","entries":[],"deleted":["b","a"]}`))
	f.Add([]byte(`{"id":"other","entries":[]}`))
	f.Add([]byte(`{"id":"fuzz","base":"../x","entries":[{"p":"../../etc/passwd","t":"file","h":"../../x"}]}`))
	file := filepath.Join(storeDir, manifestsDir, id+manifestExt)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		m, size, err := st.readManifestFile(id)
		if err != nil {
			return
		}
		var want Manifest
		if json.Unmarshal(data, &want) != nil || !reflect.DeepEqual(&want, m) {
			t.Fatalf("%q read as %+v; encoding/json reads %+v", data, m, want)
		}
		if m.ID != id || size != int64(len(data)) {
			t.Fatalf("%q read as %q, %d bytes", data, m.ID, size)
		}
		for i := 1; i < len(m.Entries); i++ {
			if strings.Compare(m.Entries[i-1].Path, m.Entries[i].Path) > 0 {
				t.Fatalf("entries out of order: %q before %q", m.Entries[i-1].Path, m.Entries[i].Path)
			}
		}
		b, err := encodeManifest(m)
		if err != nil {
			return // a time json cannot write (a year past 9999): never one the store made
		}
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		again, _, err := st.readManifestFile(id)
		if err == nil {
			normal(m)
			normal(again)
		}
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("%+v written as %s reads as %+v, %v", m, b, again, err)
		}
	})
}

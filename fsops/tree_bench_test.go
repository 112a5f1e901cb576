package fsops

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkTree2000 is directory_tree of 2,000 files in 100 folders (the
// fixture of docs/performance.md's comparison with the MCP filesystem
// server), with the default excludes (what a client gets when it names
// none) and without them, so the difference is what the excludes cost.
// Run:
//
//	go test -run '^$' -bench Tree2000 -benchmem ./fsops/
func BenchmarkTree2000(b *testing.B) {
	root := b.TempDir()
	for d := range 100 {
		dir := filepath.Join(root, fmt.Sprintf("dir%03d", d))
		must(b, os.MkdirAll(dir, 0o755))
		for f := range 20 {
			must(b, os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%02d.txt", f)), []byte("x"), 0o644))
		}
	}
	ws, err := NewDir(root, Options{})
	must(b, err)
	defer ws.Close()
	for _, c := range []struct {
		name string
		opts TreeOptions
	}{
		{"default-excludes", TreeOptions{DefaultExcludes: true}},
		{"default-excludes+2", TreeOptions{DefaultExcludes: true, Exclude: []string{"*.log", "tmp"}}},
		{"no-excludes", TreeOptions{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				nodes, err := ws.Tree(context.Background(), ".", c.opts)
				if err != nil || len(nodes) != 100 {
					b.Fatal(len(nodes), err)
				}
				TreeJSON(nodes)
			}
		})
	}
}

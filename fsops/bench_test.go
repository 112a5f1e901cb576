package fsops

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Benchmarks of the paths the protocols hit most. Run with e.g.
//
//	go test -run XXX -bench . -benchtime 200x ./fsops/

func BenchmarkResolvePath(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ResolvePath("/var/workspace", "src/pkg/../pkg/file.go"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolve is Workspace.Resolve on a real directory: the lexical
// rules plus the symlink check of the existing path.
func BenchmarkResolve(b *testing.B) {
	root := b.TempDir()
	writeTree(b, root, map[string]string{"src/pkg/file.go": "x"})
	ws := newDirWS(b, root)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ws.Resolve("src/pkg/file.go"); err != nil {
			b.Fatal(err)
		}
	}
}

// The MCP read_text_file hot path: Resolve + ReadLines of a 4 KiB file.
func BenchmarkRead4K(b *testing.B) {
	root := b.TempDir()
	var sb strings.Builder
	for sb.Len() < 4096-40 {
		fmt.Fprintf(&sb, "line %04d of a four kilobyte text file\n", sb.Len())
	}
	content := sb.String()
	writeTree(b, root, map[string]string{"src/file.txt": content})
	ws := newDirWS(b, root)
	b.Run("Resolve+ReadLines", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(content)))
		for i := 0; i < b.N; i++ {
			if _, err := ws.Resolve("src/file.txt"); err != nil {
				b.Fatal(err)
			}
			ls, err := ws.ReadLines(context.Background(), "src/file.txt", LineRange{})
			if err != nil || len(ls.Lines) == 0 {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadLines", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(content)))
		for i := 0; i < b.N; i++ {
			ls, err := ws.ReadLines(context.Background(), "src/file.txt", LineRange{})
			if err != nil || len(ls.Lines) == 0 {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadLines-memory", func(b *testing.B) {
		mem := NewMemory("/m", Options{})
		must(b, mem.WriteFile("src/file.txt", []byte(content)))
		b.ReportAllocs()
		b.SetBytes(int64(len(content)))
		for i := 0; i < b.N; i++ {
			ls, err := mem.ReadLines(context.Background(), "src/file.txt", LineRange{})
			if err != nil || len(ls.Lines) == 0 {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReadFile", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(content)))
		for i := 0; i < b.N; i++ {
			if _, err := ws.ReadFile("src/file.txt"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("os.ReadFile-baseline", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(content)))
		for i := 0; i < b.N; i++ {
			if _, err := os.ReadFile(filepath.Join(root, "src/file.txt")); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkReadDir1000(b *testing.B) {
	root := b.TempDir()
	for i := 0; i < 1000; i++ {
		must(b, os.WriteFile(filepath.Join(root, fmt.Sprintf("f%04d.txt", i)), []byte("x"), 0o644))
	}
	ws := newDirWS(b, root)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ents, err := ws.ReadDir(".")
		if err != nil || len(ents) != 1000 {
			b.Fatal(len(ents), err)
		}
	}
}

var (
	grepTreeOnce sync.Once
	grepTreeDir  string
)

// tenKTree builds (once per process) a tree of 10,000 small source files in
// 100 directories; one file in 100 contains the needle.
func tenKTree(b *testing.B) string {
	grepTreeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fsops-bench-grep-")
		if err != nil {
			b.Fatal(err)
		}
		body := strings.Repeat("func handler(w http.ResponseWriter, r *http.Request) { return }\n", 20)
		for d := 0; d < 100; d++ {
			sub := filepath.Join(dir, fmt.Sprintf("pkg%03d", d))
			must(b, os.MkdirAll(sub, 0o755))
			for f := 0; f < 100; f++ {
				text := body
				if f == 42 {
					text += "// NEEDLE_LITERAL here\n"
				}
				must(b, os.WriteFile(filepath.Join(sub, fmt.Sprintf("file%03d.go", f)), []byte(text), 0o644))
			}
		}
		grepTreeDir = dir
	})
	return grepTreeDir
}

// BenchmarkGrepLiteral10k greps a literal over 10,000 files with fsops and
// with rg (the reference's engine) on the same tree in the same run. The
// "vs-rg" sub-benchmark runs both per iteration and reports fsops time / rg
// time as the metric "x-rg".
func BenchmarkGrepLiteral10k(b *testing.B) {
	root := tenKTree(b)
	ws := newDirWS(b, root)
	opts := GrepOptions{Pattern: "NEEDLE_LITERAL", OutputMode: "files_with_matches"}
	ours := func() {
		res, err := ws.Grep(context.Background(), opts)
		if err != nil || res.Matches != 100 {
			b.Fatalf("matches %d, %v", res.Matches, err)
		}
	}
	rg, rgErr := exec.LookPath("rg")
	theirs := func() {
		// The reference's exact command line (no --sort: rg walks in parallel).
		args := []string{"--color=never", "--no-heading", "--with-filename", "-l", "--", opts.Pattern}
		cmd := exec.Command(rg, args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil || strings.Count(string(out), "\n") != 100 {
			b.Fatalf("rg: %v", err)
		}
	}
	b.Run("fsops", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			ours()
		}
	})
	if rgErr != nil {
		b.Log("rg not installed: no comparison")
		return
	}
	b.Run("rg", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			theirs()
		}
	})
	b.Run("vs-rg", func(b *testing.B) {
		var o, t time.Duration
		for i := 0; i < b.N; i++ {
			s := time.Now()
			ours()
			o += time.Since(s)
			s = time.Now()
			theirs()
			t += time.Since(s)
		}
		b.ReportMetric(float64(o)/float64(t), "x-rg")
	})
}

// BenchmarkWrite4K writes a 4 KiB file over and over, atomically (temp
// file and rename), with and without Options.Fsync, in one run: the cost
// of durable writes (--fsync). Run:
//
//	go test -run '^$' -bench Write4K -count 5 ./fsops/
func BenchmarkWrite4K(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 4096)
	for _, fsync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync=%v", fsync), func(b *testing.B) {
			ws, err := NewDir(b.TempDir(), Options{Fsync: fsync})
			if err != nil {
				b.Fatal(err)
			}
			defer ws.Close()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := ws.WriteFile("d/f.txt", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

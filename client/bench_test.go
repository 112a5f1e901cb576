package client

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkRemoteClients: the Go remote client and the published npm
// client (agent-backend 0.13.2, interop/bench/npm-remote-client.mjs) on the
// same daemon in one run: read 4 KiB, write 4 KiB, readdir of 100 entries,
// exec of true, one at a time (ns/op is the latency) and 8 at a time
// (ns/op is the inverse of the throughput). Run:
//
//	go test -run '^$' -bench RemoteClients -benchtime 2000x ./client/
func BenchmarkRemoteClients(b *testing.B) {
	d := startDaemonAddr(b, "127.0.0.1:0", nil)
	ctx := context.Background()
	r, err := NewRemote(ctx, d.options())
	if err != nil {
		b.Fatal(err)
	}
	defer r.Destroy()
	r.Write(ctx, "bench/4k.txt", []byte(strings.Repeat("x", 4096)))
	for i := range 100 {
		r.Write(ctx, fmt.Sprintf("bench/dir100/f%03d", i), nil)
	}
	data := []byte(strings.Repeat("y", 4096))
	ops := []struct {
		name string
		run  func() error
	}{
		{"read4k", func() error { _, err := r.Read(ctx, "bench/4k.txt"); return err }},
		{"write4k", func() error { return r.Write(ctx, "bench/w.txt", data) }},
		{"readdir100", func() error { _, err := r.Readdir(ctx, "bench/dir100"); return err }},
		{"exec-true", func() error { _, err := r.Exec(ctx, "true", ExecOptions{}); return err }},
	}
	script, _ := filepath.Abs("../interop/bench/npm-remote-client.mjs")
	_, npmErr := os.Stat("../interop/node_modules/agent-backend")
	for _, op := range ops {
		b.Run("go/"+op.name+"/1", func(b *testing.B) {
			for b.Loop() {
				if err := op.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("go/"+op.name+"/8", func(b *testing.B) {
			b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0))) // 8 goroutines
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := op.run(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
		for _, conc := range []int{1, 8} {
			b.Run("npm/"+op.name+"/"+strconv.Itoa(conc), func(b *testing.B) {
				if npmErr != nil {
					b.Fatalf("the npm client is needed (cd interop && npm ci): %v", npmErr)
				}
				cmd := exec.Command("node", script, "127.0.0.1", strconv.Itoa(d.port), d.root, d.token, op.name, strconv.Itoa(b.N), strconv.Itoa(conc))
				cmd.Dir = filepath.Dir(script)
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("node: %v\n%s", err, out)
				}
				var res struct{ NsPerOp float64 }
				if err := json.Unmarshal(out[strings.LastIndexByte(strings.TrimSpace(string(out)), '\n')+1:], &res); err != nil {
					b.Fatalf("node's answer %q: %v", out, err)
				}
				b.ReportMetric(res.NsPerOp, "npm-ns/op")
			})
		}
	}
}

// BenchmarkLocal: the local backend's read of 4 KiB and exec of true beside
// their floors, os.ReadFile and a fork/exec of true. Run:
//
//	go test -run '^$' -bench 'Local$' -benchtime 2000x ./client/
func BenchmarkLocal(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	l, err := NewLocal(LocalOptions{Root: dir, Isolation: "software"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Destroy()
	l.Write(ctx, "4k.txt", []byte(strings.Repeat("x", 4096)))
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("read4k/backend", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Read(ctx, "4k.txt"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read4k/os.ReadFile", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadFile(filepath.Join(dir, "4k.txt")); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exec-true/backend", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Exec(ctx, "true", ExecOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exec-true/fork-exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(truePath).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

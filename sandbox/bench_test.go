//go:build linux

package sandbox

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// Benchmarks of the exec path. Compare within one run:
//
//	go test -run XXX -bench . -benchtime=200x ./sandbox
//
// BenchmarkFloor* are the raw costs the executor adds to: fork/exec of
// /bin/true, and of the shell running `true` (what every mode must pay).
// BenchmarkBareBwrap is bwrap with the same mounts and no executor.

func BenchmarkFloorTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFloorShellTrue(b *testing.B) {
	sh, _, _, err := resolveShell(ShellAuto)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := exec.Command(sh, "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBareBwrap(b *testing.B) {
	needBwrap(b)
	ws := b.TempDir()
	e, err := New(Config{Mode: ModeBwrap, WorkspaceRoot: mustReal(b, ws)})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	x := e.(*executor)
	args := append([]string{}, x.bwrapBase...)
	args = append(args, "--new-session", "--bind", x.root, x.root, "--chdir", x.root, "--", "/bin/true")
	for b.Loop() {
		if err := exec.Command(x.bwrapPath, args...).Run(); err != nil {
			b.Fatal(err)
		}
	}
}

func benchMode(b *testing.B, mode Mode, shell ...Shell) {
	if mode == ModeBwrap {
		needBwrap(b)
	}
	cfg := Config{Mode: mode, WorkspaceRoot: mustReal(b, b.TempDir())}
	if len(shell) > 0 {
		cfg.Shell = shell[0]
	}
	e, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	req := Request{Command: "true"}
	b.ReportAllocs()
	for b.Loop() {
		res, err := e.Run(ctx, req)
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}
}

func BenchmarkRunNone(b *testing.B)     { benchMode(b, ModeNone) }
func BenchmarkRunSoftware(b *testing.B) { benchMode(b, ModeSoftware) }
func BenchmarkRunBwrap(b *testing.B)    { benchMode(b, ModeBwrap) }
func BenchmarkRunLandlock(b *testing.B) { benchMode(b, ModeLandlock) }

// BenchmarkRunSoftwareSh uses --shell sh (dash on Debian), whose start-up
// is close to /bin/true's: the gap to BenchmarkFloorTrue is then the
// executor's own cost.
func BenchmarkRunSoftwareSh(b *testing.B) { benchMode(b, ModeSoftware, ShellSh) }

func mustReal(b testing.TB, p string) string {
	b.Helper()
	r, err := realPath(p)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkRunDirect is Run("true") and Run("cd <root> && true") (the
// TypeScript client's shape) with the direct fast path on and off
// (direct.go), in software and bwrap modes.
func BenchmarkRunDirect(b *testing.B) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		for _, shape := range []string{"true", "cd"} {
			for _, fast := range []bool{true, false} {
				name := string(mode) + "/" + shape + "/direct"
				if !fast {
					name = string(mode) + "/" + shape + "/shell"
				}
				b.Run(name, func(b *testing.B) {
					if mode == ModeBwrap {
						needBwrap(b)
					}
					root := mustReal(b, b.TempDir())
					e, err := New(Config{Mode: mode, WorkspaceRoot: root})
					if err != nil {
						b.Fatal(err)
					}
					defer e.Close()
					e.(*executor).noDirect = !fast
					req := Request{Command: "true"}
					if shape == "cd" {
						req.Command = `HOME='` + root + `' cd "` + root + `" && true`
					}
					ctx := context.Background()
					b.ReportAllocs()
					for b.Loop() {
						res, err := e.Run(ctx, req)
						if err != nil || res.ExitCode != 0 {
							b.Fatal(res, err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkExecutorRunParallel is Run("true") in software mode from two
// goroutines per GOMAXPROCS at once, on one executor: how many commands it
// starts per second when callers do not wait for each other (calls/s).
// Run it with -cpu 1,2,4 to see the start path scale, or not, with the
// cores; add -mutexprofile and -blockprofile to see what callers wait on.
func BenchmarkExecutorRunParallel(b *testing.B) {
	e, err := New(Config{Mode: ModeSoftware, WorkspaceRoot: mustReal(b, b.TempDir())})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	req := Request{Command: "true"}
	b.SetParallelism(2)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := e.Run(context.Background(), req)
			if err != nil || res.ExitCode != 0 {
				b.Errorf("Run(true): %+v, %v", res, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkRunVsFloor alternates Run("true") in software mode with its
// floor, os/exec of /bin/true from the same process, one of each per
// iteration, so that both see the same load; it reports the median of
// each (run-p50-µs, floor-p50-µs) and their ratio. On a shared machine
// the ratio is the figure to compare between builds:
//
//	go test -run '^$' -bench RunVsFloor -benchtime 1000x ./sandbox/
func BenchmarkRunVsFloor(b *testing.B) {
	e, err := New(Config{Mode: ModeSoftware, WorkspaceRoot: mustReal(b, b.TempDir())})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	req := Request{Command: "true"}
	var runs, floors []time.Duration
	for b.Loop() {
		t := time.Now()
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
		floors = append(floors, time.Since(t))
		t = time.Now()
		res, err := e.Run(context.Background(), req)
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
		runs = append(runs, time.Since(t))
	}
	r, f := median(runs), median(floors)
	b.ReportMetric(float64(r.Microseconds()), "run-p50-µs")
	b.ReportMetric(float64(f.Microseconds()), "floor-p50-µs")
	b.ReportMetric(float64(r)/float64(f), "ratio")
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

//go:build linux

package sandbox

import (
	"context"
	"testing"
)

// BenchmarkCgroupKinds is BenchmarkRunSoftware with each way of holding a
// command: its own v1 pids cgroup, its own v2 cgroup, or none (the
// subreaper fallback). The difference is what a cgroup costs per command.
func BenchmarkCgroupKinds(b *testing.B) {
	for _, k := range []struct {
		name string
		kind cgroupKind
	}{{"v1-pids", cgroupV1Pids}, {"v2", cgroupV2}, {"none", cgroupOff}} {
		b.Run(k.name, func(b *testing.B) {
			var e Executor
			var err error
			withCgroupKind(k.kind, func() {
				e, err = New(Config{Mode: ModeSoftware, WorkspaceRoot: mustReal(b, b.TempDir())})
			})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			if x := e.(*executor); k.kind != cgroupOff && (x.cgroups == nil || x.cgroups.kind != k.kind) {
				b.Skipf("%s is not available here", k.kind)
			}
			req := Request{Command: "true"}
			for b.Loop() {
				if res, err := e.Run(context.Background(), req); err != nil || res.ExitCode != 0 {
					b.Fatal(res, err)
				}
			}
		})
	}
}

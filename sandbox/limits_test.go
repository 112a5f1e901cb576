//go:build linux

package sandbox

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// TestMaxConcurrent: with every slot taken (by started processes and by a
// Run in flight) the next command is refused at once, naming the flag; a
// slot comes back when its command ends, whichever way it was started.
func TestMaxConcurrent(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode, func(c *Config) { c.MaxConcurrent = 2 })
			refused := func(what string) {
				t.Helper()
				begin := time.Now()
				_, err := e.Run(context.Background(), Request{Command: "echo over"})
				if !errcode.Is(err, errcode.ExecError) || !strings.Contains(err.Error(), "2 commands are already running, the most --exec-max-concurrent allows") {
					t.Fatalf("%s: Run over the bound: %v", what, err)
				}
				if _, err := e.Start(context.Background(), Request{Command: "echo over"}, Stdio{}); !errcode.Is(err, errcode.ExecError) {
					t.Fatalf("%s: Start over the bound: %v", what, err)
				}
				if d := time.Since(begin); d > 5*time.Second {
					t.Fatalf("%s: refusing took %v; it must not wait", what, d)
				}
			}

			p1, err := e.Start(context.Background(), Request{Command: "sleep 60"}, Stdio{})
			if err != nil {
				t.Fatal(err)
			}
			runDone := make(chan error, 1)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				_, err := e.Run(ctx, Request{Command: "sleep 60"})
				runDone <- err
			}()
			// Wait until the Run holds its slot.
			for deadline := time.Now().Add(30 * time.Second); len(e.(*executor).slots) < 2; {
				if time.Now().After(deadline) {
					t.Fatal("the Run never took its slot")
				}
				time.Sleep(10 * time.Millisecond)
			}
			refused("a Start and a Run running")

			// A Run that ends gives its slot back.
			cancel()
			<-runDone
			if res := run(t, e, Request{Command: "echo again"}); string(res.Stdout) != "again\n" {
				t.Fatalf("after the Run ended: %q", res.Stdout)
			}
			p2, err := e.Start(context.Background(), Request{Command: "sleep 60"}, Stdio{})
			if err != nil {
				t.Fatalf("after the Run ended, Start: %v", err)
			}
			refused("two Starts running")

			// A started process gives its slot back when Wait returns.
			for _, p := range []Process{p1, p2} {
				if err := p.Signal("KILL"); err != nil {
					t.Fatal(err)
				}
				if _, err := p.Wait(); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				if res := run(t, e, Request{Command: "echo free"}); string(res.Stdout) != "free\n" {
					t.Fatalf("after the processes ended: %q", res.Stdout)
				}
			}
		})
	}
}

package procs

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// BenchmarkProcessOutput is process_output's round trip through the
// registry (decode, the ring's copy, encode) for a process that has
// printed 64 KiB: "from-cursor" reads what is new since the last call
// (nothing, the steady state of a follower), "tail-4k" the last 4 KiB.
// Run:
//
//	go test -run '^$' -bench ProcessOutput -benchmem ./procs/
func BenchmarkProcessOutput(b *testing.B) {
	ws, err := fsops.NewDir(b.TempDir(), fsops.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	exe, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root()})
	if err != nil {
		b.Fatal(err)
	}
	defer exe.Close()
	m := New(Options{Executor: exe})
	defer m.Close()
	reg := registry.New(registry.Options{})
	if err := reg.Set("processes", m.Tools()); err != nil {
		b.Fatal(err)
	}
	call := func(tool, args string) string {
		res, err := reg.Call(context.Background(), tool, registry.Call{Args: json.RawMessage(args), Workspace: ws})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", tool, err, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	var started struct{ ID string }
	json.Unmarshal([]byte(call("process_start", `{"command":"head -c 65536 /dev/zero | tr '\\0' x; sleep 60"}`)), &started)
	var out struct {
		Stdout string
		Cursor struct{ Stdout, Stderr int64 }
	}
	for deadline := time.Now().Add(10 * time.Second); len(out.Stdout) < 65536 && time.Now().Before(deadline); {
		json.Unmarshal([]byte(call("process_output", `{"id":"`+started.ID+`"}`)), &out)
	}
	if len(out.Stdout) < 65536 {
		b.Fatalf("the process printed %d bytes", len(out.Stdout))
	}
	since := `{"id":"` + started.ID + `","since":{"stdout":65536,"stderr":0}}`
	b.Run("from-cursor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			call("process_output", since)
		}
	})
	b.Run("tail-4k", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if s := call("process_output", `{"id":"`+started.ID+`","tail":4096}`); !strings.Contains(s, "xxxx") {
				b.Fatal(s)
			}
		}
	})
}

// BenchmarkRingWrite is a process's output arriving in the pump's chunks
// (512 bytes and 32 KiB) into a full 1 MiB ring, the steady state of a
// chatty process. Run:
//
//	go test -run '^$' -bench RingWrite -benchmem ./procs/
func BenchmarkRingWrite(b *testing.B) {
	for _, n := range []int{512, 32 << 10} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			r := newRing(DefaultBufferBytes)
			r.Write(make([]byte, DefaultBufferBytes))
			p := make([]byte, n)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				r.Write(p)
			}
		})
	}
}

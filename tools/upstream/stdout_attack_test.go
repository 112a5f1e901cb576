package upstream

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestAttackExitLeavingStdoutHeld: a server that exits leaving a process
// of its own session (setsid, out of its process group) that holds its
// stdout open is seen exited and restarted, with pings an hour apart:
// the process left behind is killed with the command (the sandbox's
// reaper), and a stream still held after the exit is cut after
// stdoutEndGrace (transport.exited), so neither waits for it. The
// fixture's cleanup finds no process of the test left.
func TestAttackExitLeavingStdoutHeld(t *testing.T) {
	tm := fastTiming
	tm.pingInterval = time.Hour
	f := start(t, "crash-leaves-child", sandbox.ModeSoftware, nil, tm)
	first := f.running(t)
	if _, isErr, _ := f.call(t, nil, "t__crash", `{}`); !isErr {
		t.Error("crash: no error")
	}
	if !strings.Contains(f.recorded(), "left child pid=") {
		t.Fatalf("the server left no child:\n%s", f.recorded())
	}
	h := f.waitFor(t, "the restart", func(h Health) bool { return h.Restarts == 1 && h.State == StateRunning && h.PID != first.PID })
	if !strings.Contains(h.LastError, "exited with status 3") {
		t.Errorf("last_error: %q", h.LastError)
	}
	if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"back"}`); isErr || txt != "back" {
		t.Errorf("after the restart: %q %v", txt, isErr)
	}
}

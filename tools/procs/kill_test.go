package procs

import (
	"strings"
	"testing"
)

// TestKillAnswersFinalState: process_kill answers once the process is gone,
// with its final state (exited, the exit code, signal KILL, no pid), the
// same description process_list then gives; a process whose tree ignores
// TERM and has children is killed whole; a process that had already ended
// is described with its own exit code; an unknown id is refused.
func TestKillAnswersFinalState(t *testing.T) {
	f := setup(t, nil)
	var in Info
	// A shell that ignores TERM, with a child of its own: KILL reaches both.
	if txt, isErr := f.call(t, "", "process_start", `{"command":"trap '' TERM; sleep 600 & sleep 600; wait","env":{"PROCS_MARK":"`+f.mark+`"}}`, &in); isErr || in.State != "running" {
		t.Fatalf("start: %s", txt)
	}
	var k Info
	txt, isErr := f.call(t, "", "process_kill", `{"id":"`+in.ID+`"}`, &k)
	if isErr {
		t.Fatalf("kill: %s", txt)
	}
	if k.ID != in.ID || k.State != "exited" || k.ExitCode == nil || *k.ExitCode != 128+9 || k.Signal != "KILL" || k.PID != 0 {
		t.Errorf("kill answered %s, want state exited, exitCode 137, signal KILL, no pid", txt)
	}
	var list struct{ Processes []Info }
	f.call(t, "", "process_list", `{}`, &list)
	if len(list.Processes) != 1 || list.Processes[0].State != k.State || list.Processes[0].Signal != k.Signal ||
		list.Processes[0].ExitCode == nil || *list.Processes[0].ExitCode != *k.ExitCode {
		t.Errorf("process_list after kill: %+v, kill answered %s", list.Processes, txt)
	}

	// Already ended: its own code, not a kill.
	var done, w, k2 Info
	f.call(t, "", "process_start", `{"command":"exit 4"}`, &done)
	f.call(t, "", "process_wait", `{"id":"`+done.ID+`","timeoutMs":20000}`, &w)
	txt, isErr = f.call(t, "", "process_kill", `{"id":"`+done.ID+`"}`, &k2)
	if isErr || k2.State != "exited" || k2.ExitCode == nil || *k2.ExitCode != 4 || k2.Signal != "" {
		t.Errorf("kill of an ended process: %s", txt)
	}

	if txt, isErr := f.call(t, "", "process_kill", `{"id":"nope"}`, nil); !isErr || !strings.Contains(txt, `no background process "nope"`) {
		t.Errorf("kill of an unknown id: %s", txt)
	}
}

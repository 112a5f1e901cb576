package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKilledDaemonsLeaveAWholeStateDir: a daemon with --checkpoints auto
// (each write_file preceded by a checkpoint: blobs, a manifest, prunes
// past --checkpoint-max-count) and an audit log, killed with SIGKILL at a
// random moment of a stream of calls, 50 times over one --state-dir. After
// that a start serves every checkpoint it lists (each one restores), it
// leaves no temp file in the store, and the audit log has no record glued
// to a line a kill cut short.
func TestKilledDaemonsLeaveAWholeStateDir(t *testing.T) {
	if testing.Short() {
		t.Skip("50 daemons killed with SIGKILL: not in -short")
	}
	base := t.TempDir()
	root, state, audit := filepath.Join(base, "root"), filepath.Join(base, "state"), filepath.Join(base, "audit.log")
	args := []string{"daemon", "--root", root, "--local-only", "--isolation", "software", "--checkpoints", "auto",
		"--checkpoint-max-count", "20", "--state-dir", state, "--audit-log", audit}
	for cycle := range 50 {
		cmd := exec.Command(binary, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		answered := make(chan struct{}, 1000)
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				answered <- struct{}{}
			}
		}()
		go func() {
			io.WriteString(stdin, initReq+"\n"+initNote+"\n")
			for i := range 300 {
				call := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"f%d.txt","content":"cycle %d call %d %s"}}}`,
					10+i, i%7, cycle, i, strings.Repeat("x", rand.IntN(9000)))
				if _, err := io.WriteString(stdin, call+"\n"); err != nil {
					return // killed
				}
			}
		}()
		// Kill it once it answered initialize and a random number of
		// calls (the first cycles: before it answered anything).
		for range rand.IntN(40) - 2 {
			select {
			case <-answered:
			case <-time.After(30 * time.Second): // hang guard
				t.Fatalf("cycle %d: the daemon stopped answering", cycle)
			}
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		stdin.Close()
	}

	// The start after the last kill: every checkpoint listed restores.
	list := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"checkpoint_list","arguments":{}}}`
	lines, stderr := mcpLines(t, args, initReq, initNote, list)
	var res struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Checkpoints []struct{ ID string } `json:"checkpoints"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &res) != nil || res.Result.IsError {
		t.Fatalf("checkpoint_list after 50 kills: %q\n%s", lines, stderr)
	}
	cps := res.Result.StructuredContent.Checkpoints
	if len(cps) == 0 {
		t.Fatalf("no checkpoint survived 50 kills: %s\n%s", lines[1], stderr)
	}
	reqs := []string{initReq, initNote}
	for i, cp := range cps {
		reqs = append(reqs, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"checkpoint_restore","arguments":{"id":%q}}}`, 10+i, cp.ID))
	}
	// --checkpoints manual: under auto, each restore's own checkpoint
	// would prune the oldest of the others past --checkpoint-max-count.
	manual := append([]string(nil), args...)
	for i := range manual {
		if manual[i] == "auto" {
			manual[i] = "manual"
		}
	}
	lines, stderr = mcpLines(t, manual, reqs...)
	for i, l := range lines[1:] {
		if strings.Contains(l, `"isError":true`) || strings.Contains(l, `"error":`) {
			t.Errorf("restore of %s, listed after the kills: %s\n%s", cps[i].ID, l, stderr)
		}
	}
	t.Logf("%d checkpoints listed and restored after 50 kills", len(cps))

	// No temp file stays in the store (each start removes what a kill
	// left).
	if left, _ := os.ReadDir(filepath.Join(state, "checkpoints", "tmp")); len(left) > 0 {
		t.Errorf("%d temp files left in the store's tmp/ after a clean start", len(left))
	}
	// No record glued to a cut line.
	data, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) != nil && strings.Contains(line[1:], `{"time"`) {
			t.Errorf("a record glued to a line a kill cut short: %.300s", line)
		}
	}
}

// TestSecondDaemonOnOneStateDir: a second daemon given the --state-dir of
// one that runs (another port, another root) and keeping checkpoints
// there is refused before it serves: one line naming the store and
// --state-dir and the first daemon's pid, exit 1. The first keeps serving.
func TestSecondDaemonOnOneStateDir(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	a := startDaemon(t, "--root", t.TempDir(), "--state-dir", state, "--checkpoints", "manual")
	_, errOut, code := run(t, nil, "daemon", "--root", t.TempDir(), "--state-dir", state, "--checkpoints", "manual",
		"--isolation", "software", "--port", fmt.Sprint(freePort(t)), "--ssh-host-key", filepath.Join(t.TempDir(), "hostkey"))
	t.Logf("the second daemon: exit %d, %s", code, errOut)
	if code != 1 || !strings.Contains(errOut, filepath.Join(state, "checkpoints")) || !strings.Contains(errOut, "--state-dir") ||
		!strings.Contains(errOut, fmt.Sprintf("pid %d", a.cmd.Process.Pid)) {
		t.Fatalf("second daemon on one state dir: exit %d, stderr:\n%s\nwant exit 1 and a line naming the store, the first daemon's pid and --state-dir", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
	if !strings.HasPrefix(lines[len(lines)-1], "agent-backend: --checkpoints: checkpoint store ") {
		t.Errorf("want the refusal as stderr's last line, got:\n%s", errOut)
	}
	if !healthy(a.url) {
		t.Fatalf("the first daemon stopped serving after the second was refused: %s", a.stderr)
	}
}

func healthy(url string) bool {
	resp, err := http.Get(url + "/health")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

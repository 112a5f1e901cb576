package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProcessToolsOnDaemon: with --process-tools the process tools are
// listed and work through /execute; without it they are not served;
// stopping the daemon kills a process that still runs.
func TestProcessToolsOnDaemon(t *testing.T) {
	c := testConfig(t)
	c.ProcessTools = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	execute := func(tool, args string) map[string]any {
		t.Helper()
		return executeTool(t, r.url, tool, args)
	}
	mark := "daemon-procs-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	started := execute("process_start", `{"command":"echo ready; sleep 30","name":"srv","env":{"PROCS_MARK":"`+mark+`"}}`)
	id, _ := started["id"].(string)
	if id == "" {
		t.Fatalf("start: %v", started)
	}
	deadline := time.Now().Add(20 * time.Second) // a hang guard
	for {
		out := execute("process_output", `{"id":"`+id+`"}`)
		if out["stdout"] == "ready\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("output: %v", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, tools := get(t, r.url+"/tools")
	for _, name := range []string{"process_start", "process_list", "process_output", "process_wait", "process_signal", "process_kill"} {
		if !strings.Contains(string(tools), `"`+name+`"`) {
			t.Errorf("/tools lacks %s", name)
		}
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ")); err == nil && strings.Contains(string(env), "PROCS_MARK="+mark) {
			t.Errorf("process %s outlived the daemon", e.Name())
		}
	}

	// Off by default.
	plain := start(t, testConfig(t), nil)
	if _, tools := get(t, plain.url+"/tools"); strings.Contains(string(tools), "process_start") {
		t.Error("the process tools are served without --process-tools")
	}
}

// TestWatchToolOnDaemon: with --watch-tools, watch_changes over REST
// starts at a cursor and then reports a file written over MCP.
func TestWatchToolOnDaemon(t *testing.T) {
	c := testConfig(t)
	c.WatchTools = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	execute := func(args string) map[string]any {
		t.Helper()
		return executeTool(t, r.url, "watch_changes", args)
	}
	startAt := execute(`{}`)
	cur, ok := startAt["cursor"].(float64)
	if !ok {
		t.Fatalf("start: %v", startAt)
	}
	if code, body := mcpCall(t, r.url, "write_file", `{"path":"build/out.txt","content":"done"}`); code != http.StatusOK || strings.Contains(body, `"isError":true`) {
		t.Fatalf("write_file: %d %s", code, body)
	}
	got := execute(`{"cursor":` + strconv.Itoa(int(cur)) + `,"timeoutMs":10000}`)
	events, _ := got["events"].([]any)
	found := false
	for _, e := range events {
		if m, _ := e.(map[string]any); m["path"] == "build" || m["path"] == "build/out.txt" {
			found = true
		}
	}
	if !found {
		t.Fatalf("the write was not reported: %v", got)
	}
	c2 := testConfig(t)
	c2.WatchTools, c2.Backend = true, "memory"
	if err := c2.Validate(); err == nil {
		if _, err := New(c2, Options{}); err == nil || !strings.Contains(err.Error(), "--watch-tools") {
			t.Errorf("--watch-tools with the memory backend: %v", err)
		}
	}
}

// TestWatchToolReadOnlyToken: watch_changes is read-only, so a read-only
// token (--tokens) may use it in its scope, as docs/processes.md says; its
// workspace refuses OpenDir (commands run in that descriptor), which the
// watch does not need to write anything.
func TestWatchToolReadOnlyToken(t *testing.T) {
	c := testConfig(t)
	c.AuthToken = "master-token"
	c.WatchTools = true
	must(t, os.MkdirAll(filepath.Join(c.Root, "b"), 0o755))
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+tokenLine("bob", "bob-token", `,"scope":"b","readOnly":true`)+`]}`), 0o600))
	c.TokensFile = tokens
	must(t, c.Validate())
	r := start(t, c, nil)
	code, body := callAs(t, r.url, "bob-token", "", "watch_changes", `{}`)
	if code != http.StatusOK || strings.Contains(body, `"isError":true`) || !strings.Contains(body, "cursor") {
		t.Fatalf("a read-only token's watch_changes: %d %s", code, body)
	}
	if code, body := callAs(t, r.url, "bob-token", "", "write_file", `{"path":"x","content":"y"}`); code != http.StatusOK || !strings.Contains(body, `"isError":true`) {
		t.Errorf("the read-only token wrote: %d %s", code, body)
	}
}

package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/cpuburst"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cpCall calls a tool and returns its text and structured content; an
// error result fails the test unless wantErr.
func cpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, wantErr bool) (string, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	if res.IsError != wantErr {
		t.Fatalf("%s %v: error %v, want %v: %s", name, args, res.IsError, wantErr, text)
	}
	var sc map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &sc)
	}
	return text, sc
}

// tree is every entry below dir with its type, mode and content.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v", rel, fi.Mode())
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", c)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// startManualCheckpoints starts a daemon with --checkpoints manual and a
// state directory of its own, and opens an MCP session to it.
func startManualCheckpoints(t *testing.T) (config.Config, *running, *mcp.ClientSession) {
	t.Helper()
	c := testConfig(t)
	c.Checkpoints = "manual"
	c.StateDir = t.TempDir()
	must(t, c.Validate())
	r := start(t, c, nil)
	return c, r, mcpSession(t, r)
}

// TestCheckpointStoreFollowsFsync: the store is durable exactly when the
// daemon's writes are (--fsync), and the start-up log says which.
func TestCheckpointStoreFollowsFsync(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			c := testConfig(t)
			c.Checkpoints = "manual"
			c.StateDir = t.TempDir()
			c.Fsync = fsync
			must(t, c.Validate())
			r := start(t, c, nil)
			line := regexp.MustCompile(`(?m)^.*msg="checkpoint store".*$`).FindString(r.logs.String())
			if !strings.Contains(line, fmt.Sprintf(" durable=%v ", fsync)) || !strings.Contains(line, c.CheckpointDir()) {
				t.Fatalf("the start-up log's line on the store: %q", line)
			}
			cs := mcpSession(t, r)
			cpCall(t, cs, "write_file", map[string]any{"path": "a.txt", "content": "one\n"}, false)
			cpCall(t, cs, "checkpoint_create", nil, false)
		})
	}
}

// TestCheckpointWholeStory is the checkpoint half of issue 36's story over
// MCP (the go-sdk client): write files, checkpoint, run the damaging
// command, see the damage, restore, and get back every byte; /health and
// the metrics show the store.
func TestCheckpointWholeStory(t *testing.T) {
	c, r, cs := startManualCheckpoints(t)
	files := map[string]string{"src/a.go": "package a\n", "src/lib/b.go": "package lib\n\nconst B = 2\n", "main.go": "package main\n\nfunc main() {}\n"}
	for p, content := range files {
		cpCall(t, cs, "write_file", map[string]any{"path": p, "content": content}, false)
	}
	before := tree(t, c.Root)

	_, sc := cpCall(t, cs, "checkpoint_create", map[string]any{"label": "before the command"}, false)
	id, _ := sc["id"].(string)
	if id == "" || sc["files"] != float64(3) {
		t.Fatalf("checkpoint_create: %v", sc)
	}
	cpCall(t, cs, "exec", map[string]any{"command": "rm -rf src && echo broken > main.go"}, false)
	text, _ := cpCall(t, cs, "read_text_file", map[string]any{"path": "main.go"}, false)
	if !strings.Contains(text, "broken") {
		t.Fatalf("the damage is not seen: %s", text)
	}
	text, _ = cpCall(t, cs, "checkpoint_diff", map[string]any{"from": id}, false)
	for _, want := range []string{"D src/a.go", "D src/lib/b.go", "D src/", "M main.go", "+broken", "-package main"} {
		if !strings.Contains(text, want) {
			t.Fatalf("checkpoint_diff lacks %q:\n%s", want, text)
		}
	}
	_, sc = cpCall(t, cs, "checkpoint_list", nil, false)
	if list, _ := sc["checkpoints"].([]any); len(list) != 1 || list[0].(map[string]any)["label"] != "before the command" {
		t.Fatalf("checkpoint_list: %v", sc)
	}

	text, sc = cpCall(t, cs, "checkpoint_restore", map[string]any{"id": id}, false)
	if after := tree(t, c.Root); after != before {
		t.Fatalf("after restore:\n%s\nbefore:\n%s", after, before)
	}
	if !strings.Contains(text, "A src/a.go") || !strings.Contains(text, "M main.go") || sc["added"] != float64(4) || sc["modified"] != float64(1) {
		t.Fatalf("checkpoint_restore's answer: %s %v", text, sc)
	}

	_, body := get(t, r.url+"/health")
	var h struct {
		Checkpoints struct {
			Mode  string `json:"mode"`
			Count int    `json:"count"`
			Bytes int64  `json:"bytes"`
		} `json:"checkpoints"`
	}
	must(t, json.Unmarshal(body, &h))
	if h.Checkpoints.Mode != "manual" || h.Checkpoints.Count != 1 || h.Checkpoints.Bytes == 0 {
		t.Fatalf("/health: %s", body)
	}
	_, metrics := get(t, r.url+"/metrics")
	if !strings.Contains(string(metrics), "agentbe_checkpoints 1") || !strings.Contains(string(metrics), "agentbe_checkpoint_store_bytes") {
		t.Fatalf("/metrics lacks the checkpoint gauges")
	}
	// The store survives a restart.
	must(t, r.stop())
	r2 := start(t, c, nil)
	cs2 := mcpSession(t, r2)
	if _, sc := cpCall(t, cs2, "checkpoint_list", nil, false); len(sc["checkpoints"].([]any)) != 1 {
		t.Fatalf("after a restart: %v", sc)
	}
}

// TestCheckpointWalksBurst: the daemon's checkpoint store walks the
// workspace inside internal/cpuburst's hold (what --max-procs auto sets up
// in cmd/agent-backend): a create, a diff to now and a restore each raise
// GOMAXPROCS once, /metrics counts them, and GOMAXPROCS is back after each.
func TestCheckpointWalksBurst(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	cpuburst.SetCeiling(procs + 1)
	t.Cleanup(func() { cpuburst.SetCeiling(0) })
	_, r, cs := startManualCheckpoints(t)
	cpCall(t, cs, "write_file", map[string]any{"path": "a.txt", "content": "one\n"}, false)
	bursts := func() float64 {
		_, body := get(t, r.url+"/metrics")
		m := regexp.MustCompile(`(?m)^agentbe_checkpoint_walk_bursts_total (\S+)$`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics lacks agentbe_checkpoint_walk_bursts_total")
		}
		n, err := strconv.ParseFloat(string(m[1]), 64)
		must(t, err)
		return n
	}
	before := bursts()
	_, sc := cpCall(t, cs, "checkpoint_create", nil, false)
	id, _ := sc["id"].(string)
	cpCall(t, cs, "checkpoint_diff", map[string]any{"from": id}, false)
	cpCall(t, cs, "checkpoint_restore", map[string]any{"id": id}, false)
	if got := bursts() - before; got < 3 {
		t.Errorf("agentbe_checkpoint_walk_bursts_total grew by %v over a create, a diff and a restore, want 3 or more", got)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS after the walks = %d, want %d back", got, procs)
	}
}

// TestCheckpointsAuto: with --checkpoints auto, every call that can change
// the workspace (a file tool, a command) is preceded by a checkpoint, so
// restoring the newest undoes the last call; read-only calls take none.
func TestCheckpointsAuto(t *testing.T) {
	c := testConfig(t)
	c.Checkpoints = "auto"
	c.StateDir = t.TempDir()
	must(t, c.Validate())
	r := start(t, c, nil)
	cs := mcpSession(t, r)
	newest := func() string {
		t.Helper()
		_, sc := cpCall(t, cs, "checkpoint_list", nil, false)
		list := sc["checkpoints"].([]any)
		return list[len(list)-1].(map[string]any)["id"].(string)
	}
	count := func() int {
		_, sc := cpCall(t, cs, "checkpoint_list", nil, false)
		return len(sc["checkpoints"].([]any))
	}
	cpCall(t, cs, "write_file", map[string]any{"path": "a.txt", "content": "v1"}, false)
	cpCall(t, cs, "write_file", map[string]any{"path": "a.txt", "content": "v2"}, false)
	n := count()
	cpCall(t, cs, "read_text_file", map[string]any{"path": "a.txt"}, false)
	if count() != n {
		t.Fatal("a read-only call took a checkpoint")
	}
	cpCall(t, cs, "checkpoint_restore", map[string]any{"id": newest()}, false)
	if b, _ := os.ReadFile(filepath.Join(c.Root, "a.txt")); string(b) != "v1" {
		t.Fatalf("undo of the last write: %q, want v1", b)
	}
	cpCall(t, cs, "exec", map[string]any{"command": "echo made > b.txt"}, false)
	if _, err := os.Stat(filepath.Join(c.Root, "b.txt")); err != nil {
		t.Fatal(err)
	}
	cpCall(t, cs, "checkpoint_restore", map[string]any{"id": newest()}, false)
	if _, err := os.Stat(filepath.Join(c.Root, "b.txt")); err == nil {
		t.Fatal("undo of the last command left b.txt")
	}
	// The restore itself was preceded by a checkpoint: it can be undone.
	_, sc := cpCall(t, cs, "checkpoint_list", nil, false)
	list := sc["checkpoints"].([]any)
	if label := list[len(list)-1].(map[string]any)["label"]; label != "before checkpoint_restore" {
		t.Fatalf("newest checkpoint's label %v", label)
	}
}

// TestCheckpointTokens: a scope-bound token sees and restores only its
// scope's checkpoints (another's id is answered as an unknown one); a
// read-only token lists and diffs but neither creates nor restores; the
// audit log names who restored which checkpoint and paths.
func TestCheckpointTokens(t *testing.T) {
	c := testConfig(t)
	c.Checkpoints = "manual"
	c.StateDir = t.TempDir()
	c.AuthToken = "master-token"
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	must(t, os.MkdirAll(filepath.Join(c.Root, "a"), 0o755))
	must(t, os.MkdirAll(filepath.Join(c.Root, "b"), 0o755))
	must(t, os.WriteFile(filepath.Join(c.Root, "a/note.txt"), []byte("alice's"), 0o644))
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+strings.Join([]string{
		tokenLine("alice", "alice-token", `,"scope":"a"`),
		tokenLine("bob", "bob-token", `,"scope":"b"`),
		tokenLine("reader", "reader-token", `,"scope":"a","readOnly":true`),
	}, ",")+`]}`), 0o600))
	c.TokensFile = tokens
	must(t, c.Validate())
	r := start(t, c, nil)

	code, body := callAs(t, r.url, "alice-token", "", "checkpoint_create", `{}`)
	if code != http.StatusOK || strings.Contains(body, `"isError":true`) {
		t.Fatalf("alice's checkpoint: %d %s", code, body)
	}
	i := strings.Index(body, `cp`)
	id := body[i : i+strings.IndexAny(body[i:], `\"`)]

	_, body = callAs(t, r.url, "bob-token", "", "checkpoint_list", `{}`)
	if strings.Contains(body, id) || !strings.Contains(body, `checkpoints\":[]`) {
		t.Fatalf("bob lists alice's checkpoint: %s", body)
	}
	_, unknown := callAs(t, r.url, "bob-token", "", "checkpoint_restore", `{"id":"cp999-000000"}`)
	for _, tool := range []string{"checkpoint_diff", "checkpoint_restore"} {
		args := `{"id":"` + id + `"}`
		if tool == "checkpoint_diff" {
			args = `{"from":"` + id + `"}`
		}
		_, body = callAs(t, r.url, "bob-token", "", tool, args)
		if !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "no checkpoint of this workspace has this id") {
			t.Fatalf("bob's %s of alice's checkpoint: %s", tool, body)
		}
	}
	if !strings.Contains(unknown, "no checkpoint of this workspace has this id") {
		t.Fatalf("an unknown id: %s", unknown)
	}

	_, body = callAs(t, r.url, "reader-token", "", "checkpoint_list", `{}`)
	if !strings.Contains(body, id) {
		t.Fatalf("the read-only token in alice's scope does not list her checkpoint: %s", body)
	}
	_, body = callAs(t, r.url, "reader-token", "", "checkpoint_diff", `{"from":"`+id+`"}`)
	if strings.Contains(body, `"isError":true`) || !strings.Contains(body, "no changes") {
		t.Fatalf("read-only diff: %s", body)
	}
	for _, call := range [][2]string{{"checkpoint_create", `{}`}, {"checkpoint_restore", `{"id":"` + id + `"}`}} {
		_, body = callAs(t, r.url, "reader-token", "", call[0], call[1])
		if !strings.Contains(body, "Permission denied") {
			t.Fatalf("read-only %s: %s", call[0], body)
		}
	}

	must(t, os.WriteFile(filepath.Join(c.Root, "a/note.txt"), []byte("damaged"), 0o644))
	_, body = callAs(t, r.url, "alice-token", "", "checkpoint_restore", `{"id":"`+id+`","paths":["note.txt"]}`)
	if strings.Contains(body, `"isError":true`) {
		t.Fatalf("alice's restore: %s", body)
	}
	if b, _ := os.ReadFile(filepath.Join(c.Root, "a/note.txt")); string(b) != "alice's" {
		t.Fatalf("restored note: %q", b)
	}
	must(t, r.stop())
	audit, _ := os.ReadFile(c.AuditLog)
	var found bool
	for _, line := range strings.Split(string(audit), "\n") {
		if strings.Contains(line, "checkpoint_restore") && strings.Contains(line, "alice") && strings.Contains(line, id) && strings.Contains(line, "note.txt") {
			found = true
		}
	}
	if !found {
		t.Fatalf("the audit log does not name alice's restore of %s and its paths:\n%s", id, audit)
	}
}

// TestCheckpointsOnEveryFace: the checkpoint tools come through the
// registry to every face: created over REST, listed over /gateway,
// diffed over MCP's fast path.
func TestCheckpointsOnEveryFace(t *testing.T) {
	c := testConfig(t)
	c.Checkpoints = "manual"
	c.StateDir = t.TempDir()
	must(t, c.Validate())
	must(t, os.WriteFile(filepath.Join(c.Root, "a.txt"), []byte("one\n"), 0o644))
	r := start(t, c, nil)

	created := executeTool(t, r.url, "checkpoint_create", `{"label":"rest"}`)
	id, _ := created["id"].(string)
	if id == "" {
		t.Fatalf("REST checkpoint_create: %v", created)
	}
	gw := dialGW(t, r.url, "")
	if got := rpcGW(t, gw, `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"toolId":"checkpoint_list","sessionId":"s","args":{}}}`); !strings.Contains(got, id) {
		t.Fatalf("/gateway checkpoint_list: %s", got)
	}
	must(t, os.WriteFile(filepath.Join(c.Root, "a.txt"), []byte("two\n"), 0o644))
	if _, body := callAs(t, r.url, "", "", "checkpoint_diff", `{"from":"`+id+`"}`); !strings.Contains(body, "M a.txt") || !strings.Contains(body, "+two") {
		t.Fatalf("MCP checkpoint_diff: %s", body)
	}
}

// TestCheckpointJournalSeesCommands: a command's writes, whatever confines
// it, reach the store's journal (the same inodes raise the events): the
// checkpoint after one lists only the directory it changed and the root,
// and captures the change; with --checkpoint-journal=false every
// checkpoint lists every directory.
func TestCheckpointJournalSeesCommands(t *testing.T) {
	for _, tc := range []struct {
		isolation string
		journal   bool
	}{{"software", true}, {"software", false}, {"bwrap", true}, {"landlock", true}} {
		t.Run(fmt.Sprintf("%s,journal=%v", tc.isolation, tc.journal), func(t *testing.T) {
			journal := tc.journal
			c := testConfig(t)
			switch tc.isolation {
			case "bwrap":
				testenv.Bwrap(t)
			case "landlock":
				if sandbox.LandlockABI() < 1 {
					testenv.Missing(t, "Landlock (a kernel with CONFIG_SECURITY_LANDLOCK, enabled at boot)")
				}
			}
			c.Isolation = tc.isolation
			c.Checkpoints = "manual"
			c.StateDir = t.TempDir()
			c.CheckpointJournal = journal
			must(t, c.Validate())
			r := start(t, c, nil)
			cs := mcpSession(t, r)
			for _, d := range []string{"a", "b", "c"} {
				cpCall(t, cs, "write_file", map[string]any{"path": d + "/f.txt", "content": d + "\n"}, false)
			}
			_, first := cpCall(t, cs, "checkpoint_create", nil, false)
			if first["listed"] != float64(4) {
				t.Fatalf("the first checkpoint: %v; want all 4 directories listed", first)
			}
			cpCall(t, cs, "exec", map[string]any{"command": "echo changed by a command > b/f.txt"}, false)
			_, second := cpCall(t, cs, "checkpoint_create", nil, false)
			want := float64(4)
			if journal {
				want = 2 // the root and b
			}
			if second["read"] != float64(1) || second["listed"] != want {
				t.Fatalf("after the command: %v; want 1 file read and %v directories listed", second, want)
			}
			text, _ := cpCall(t, cs, "checkpoint_diff", map[string]any{"from": first["id"], "to": second["id"]}, false)
			if !strings.Contains(text, "M b/f.txt") || !strings.Contains(text, "+changed by a command") {
				t.Fatalf("checkpoint_diff: %s", text)
			}
		})
	}
}

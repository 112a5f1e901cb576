package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// mcpSession is a go-sdk MCP client on r's /mcp, closed at cleanup.
func mcpSession(t *testing.T, r *running) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{}
	t.Cleanup(hc.CloseIdleConnections)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tx", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: r.url + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTool calls name and returns its text, structured content and
// whether it is an error result.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var sc map[string]any
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &sc)
	}
	return res.Content[0].(*mcp.TextContent).Text, sc, res.IsError
}

// TestTransactionWholeStory is the transaction half of issue 36's story over
// MCP (the go-sdk client): the damaging command run as a transaction leaves
// the workspace untouched and returns the diff; transaction_apply then makes
// exactly those changes; a conflicting apply is refused and changes
// nothing; a discarded transaction is gone.
func TestTransactionWholeStory(t *testing.T) {
	testenv.Bwrap(t)
	c := testConfig(t)
	c.Isolation = "bwrap"
	c.StateDir = t.TempDir()
	c.Transactions = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	cs := mcpSession(t, r)
	files := map[string]string{"src/a.go": "package a\n", "src/b.go": "package b\n", "main.go": "package main\n\nfunc main() {}\n"}
	for p, content := range files {
		if _, _, isErr := callTool(t, cs, "write_file", map[string]any{"path": p, "content": content}); isErr {
			t.Fatalf("write_file %s failed", p)
		}
	}
	text, sc, isErr := callTool(t, cs, "exec", map[string]any{"command": "rm -rf src && echo broken > main.go", "transaction": true})
	if isErr {
		t.Fatalf("exec as a transaction: %s", text)
	}
	id, _ := sc["transaction"].(string)
	if id == "" || !strings.Contains(text, id) {
		t.Fatalf("no transaction id:\n%s\n%v", text, sc)
	}
	for _, want := range []string{"D src/a.go", "D src/b.go", "M main.go", "+broken", "-package main", "-package a"} {
		if !strings.Contains(text, want) {
			t.Fatalf("the answer lacks %q:\n%s", want, text)
		}
	}
	changes, _ := sc["changes"].(map[string]any)
	if changes["deleted"] != float64(3) || changes["modified"] != float64(1) {
		t.Fatalf("structured changes %v", changes)
	}
	for p, content := range files {
		if b, err := os.ReadFile(filepath.Join(c.Root, p)); err != nil || string(b) != content {
			t.Fatalf("the transaction touched the workspace: %s = %q, %v", p, b, err)
		}
	}
	if text, _, isErr := callTool(t, cs, "transaction_apply", map[string]any{"id": id}); isErr {
		t.Fatalf("transaction_apply: %s", text)
	}
	if b, _ := os.ReadFile(filepath.Join(c.Root, "main.go")); string(b) != "broken\n" {
		t.Fatalf("main.go after apply = %q", b)
	}
	if _, err := os.Lstat(filepath.Join(c.Root, "src")); !os.IsNotExist(err) {
		t.Fatalf("src after apply: %v", err)
	}
	if ents, _ := os.ReadDir(c.Root); len(ents) != 1 {
		t.Fatalf("workspace after apply holds %d entries, want main.go only", len(ents))
	}
	if text, _, isErr := callTool(t, cs, "transaction_apply", map[string]any{"id": id}); !isErr || !strings.Contains(text, "no pending transaction") {
		t.Fatalf("second apply: %v %s", isErr, text)
	}

	// A conflicting apply: main.go changes underneath after the command.
	text, sc, isErr = callTool(t, cs, "exec", map[string]any{"command": "echo mine > main.go && echo new > new.txt", "transaction": true})
	if isErr {
		t.Fatalf("exec: %s", text)
	}
	id, _ = sc["transaction"].(string)
	if _, _, isErr := callTool(t, cs, "write_file", map[string]any{"path": "main.go", "content": "someone else\n"}); isErr {
		t.Fatal("write_file failed")
	}
	text, sc, isErr = callTool(t, cs, "transaction_apply", map[string]any{"id": id})
	if !isErr || !strings.Contains(text, "main.go") || !strings.Contains(text, "conflict") {
		t.Fatalf("conflicting apply: error %v:\n%s", isErr, text)
	}
	if cf, _ := sc["conflicts"].([]any); len(cf) != 1 {
		t.Fatalf("structured conflicts %v", sc)
	}
	if b, _ := os.ReadFile(filepath.Join(c.Root, "main.go")); string(b) != "someone else\n" {
		t.Fatalf("main.go after a refused apply = %q", b)
	}
	if _, err := os.Lstat(filepath.Join(c.Root, "new.txt")); !os.IsNotExist(err) {
		t.Fatal("new.txt applied by a refused apply")
	}
	text, sc, _ = callTool(t, cs, "transaction_list", map[string]any{})
	if list, _ := sc["transactions"].([]any); len(list) != 1 {
		t.Fatalf("transaction_list: %s", text)
	}
	if _, body := send(t, http.MethodGet, r.url+"/health", "", nil); !strings.Contains(body, `"transactions":{"pending":1}`) {
		t.Fatalf("/health: %s", body)
	}
	if _, body := send(t, http.MethodGet, r.url+"/metrics", "", nil); !strings.Contains(body, "agentbe_transactions_pending 1") {
		t.Fatalf("/metrics lacks agentbe_transactions_pending 1")
	}
	if text, _, isErr := callTool(t, cs, "transaction_discard", map[string]any{"id": id}); isErr {
		t.Fatalf("discard: %s", text)
	}
	_, sc, _ = callTool(t, cs, "transaction_list", map[string]any{})
	if list, _ := sc["transactions"].([]any); len(list) != 0 {
		t.Fatalf("transaction_list after discard: %v", sc)
	}
	// The daemon's own directory (transactions/d-<random>) holds its lock
	// file and nothing else.
	own, err := filepath.Glob(filepath.Join(c.StateDir, "transactions", "d-*"))
	if err != nil || len(own) != 1 {
		t.Fatalf("the daemon's own transactions directory: %v (%v)", own, err)
	}
	if ents, err := os.ReadDir(own[0]); err != nil || len(ents) != 1 || ents[0].Name() != sandbox.OverlayLockFile {
		t.Fatalf("transaction directories left: %v (%v)", ents, err)
	}
}

// TestTransactionRefusedOutsideBwrap: in software mode a transaction is
// refused naming bwrap, and the command does not run.
func TestTransactionRefusedOutsideBwrap(t *testing.T) {
	c := testConfig(t)
	c.StateDir = t.TempDir()
	c.Transactions = true
	r := start(t, c, nil)
	cs := mcpSession(t, r)
	text, _, isErr := callTool(t, cs, "exec", map[string]any{"command": "touch ran", "transaction": true})
	if !isErr || !strings.Contains(text, "bwrap") {
		t.Fatalf("error %v: %s", isErr, text)
	}
	if _, err := os.Lstat(filepath.Join(c.Root, "ran")); !os.IsNotExist(err) {
		t.Fatal("the command ran on the workspace")
	}
}

// TestTransactionTokens: a scope-bound token sees, applies and discards
// only its scope's transactions (another's id is answered as an unknown
// one); a read-only token lists them but makes, applies and discards none;
// the audit log names who applied which transaction.
func TestTransactionTokens(t *testing.T) {
	testenv.Bwrap(t)
	c := testConfig(t)
	c.Isolation = "bwrap"
	c.StateDir = t.TempDir()
	c.Transactions = true
	c.AuthToken = "master-token"
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	must(t, os.MkdirAll(filepath.Join(c.Root, "a"), 0o755))
	must(t, os.MkdirAll(filepath.Join(c.Root, "b"), 0o755))
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+strings.Join([]string{
		tokenLine("alice", "alice-token", `,"scope":"a"`),
		tokenLine("bob", "bob-token", `,"scope":"b"`),
		tokenLine("reader", "reader-token", `,"scope":"a","readOnly":true`),
	}, ",")+`]}`), 0o600))
	c.TokensFile = tokens
	must(t, c.Validate())
	r := start(t, c, nil)

	_, body := callAs(t, r.url, "alice-token", "", "exec", `{"command":"echo x > f","transaction":true}`)
	var resp struct {
		Result struct {
			IsError           bool
			StructuredContent struct{ Transaction string }
		}
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || resp.Result.IsError || resp.Result.StructuredContent.Transaction == "" {
		t.Fatalf("alice's transaction: %v %s", err, body)
	}
	id := resp.Result.StructuredContent.Transaction

	_, body = callAs(t, r.url, "bob-token", "", "transaction_list", `{}`)
	if strings.Contains(body, id) {
		t.Fatalf("bob lists alice's transaction: %s", body)
	}
	for _, tool := range []string{"transaction_apply", "transaction_discard"} {
		_, body = callAs(t, r.url, "bob-token", "", tool, `{"id":"`+id+`"}`)
		if !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "no pending transaction") {
			t.Fatalf("bob's %s of alice's transaction: %s", tool, body)
		}
	}
	_, body = callAs(t, r.url, "reader-token", "", "transaction_list", `{}`)
	if !strings.Contains(body, id) {
		t.Fatalf("the read-only token in alice's scope does not list her transaction: %s", body)
	}
	for _, call := range [][2]string{{"exec", `{"command":"echo y > g","transaction":true}`},
		{"transaction_apply", `{"id":"` + id + `"}`}, {"transaction_discard", `{"id":"` + id + `"}`}} {
		_, body = callAs(t, r.url, "reader-token", "", call[0], call[1])
		if !strings.Contains(body, "Permission denied") {
			t.Fatalf("read-only %s: %s", call[0], body)
		}
	}
	_, body = callAs(t, r.url, "alice-token", "", "transaction_apply", `{"id":"`+id+`"}`)
	if strings.Contains(body, `"isError":true`) {
		t.Fatalf("alice's apply: %s", body)
	}
	if b, _ := os.ReadFile(filepath.Join(c.Root, "a/f")); string(b) != "x\n" {
		t.Fatalf("a/f = %q", b)
	}
	must(t, r.stop())
	audit, _ := os.ReadFile(c.AuditLog)
	var found bool
	for _, line := range strings.Split(string(audit), "\n") {
		if strings.Contains(line, "transaction_apply") && strings.Contains(line, "alice") && strings.Contains(line, id) {
			found = true
		}
	}
	if !found {
		t.Fatalf("the audit log does not name alice's apply of %s:\n%s", id, audit)
	}
}

// TestTransactionFlags: --transaction-max-files reaches the transactions
// (a command past it is refused naming the flag), and so does
// --transaction-max-pending.
func TestTransactionFlags(t *testing.T) {
	testenv.Bwrap(t)
	c := testConfig(t)
	c.Isolation = "bwrap"
	c.StateDir = t.TempDir()
	c.Transactions = true
	c.TransactionMaxFiles = 100
	c.TransactionMaxPending = 1
	must(t, c.Validate())
	r := start(t, c, nil)
	cs := mcpSession(t, r)
	text, _, isErr := callTool(t, cs, "exec", map[string]any{"command": "for i in $(seq 1 500); do : > f$i || exit 1; done", "transaction": true})
	if !isErr || !strings.Contains(text, "--transaction-max-files") {
		t.Fatalf("error %v: %s", isErr, text)
	}
	if ents, _ := os.ReadDir(c.Root); len(ents) != 0 {
		t.Fatalf("the workspace has %d entries", len(ents))
	}
	if text, _, isErr = callTool(t, cs, "exec", map[string]any{"command": "echo 1 > one", "transaction": true}); isErr {
		t.Fatal(text)
	}
	text, _, isErr = callTool(t, cs, "exec", map[string]any{"command": "echo 2 > two", "transaction": true})
	if !isErr || !strings.Contains(text, "--transaction-max-pending 1") {
		t.Fatalf("error %v: %s", isErr, text)
	}
}

// TestTransactionsOffByDefault: without --transactions a daemon serves the
// reference's tool list (15 tools, no transaction_*, exec's schema without
// `transaction`), /health has no transactions, and exec asked for a
// transaction in any form is refused naming --transactions without running
// the command on the workspace; `transaction: false` is a plain exec. With
// --transactions the memory backend, which runs no commands, is refused
// at start naming the flag.
func TestTransactionsOffByDefault(t *testing.T) {
	c := testConfig(t)
	r := start(t, c, nil)
	cs := mcpSession(t, r)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var execProps []string
	for _, tl := range list.Tools {
		if strings.HasPrefix(tl.Name, "transaction") {
			t.Errorf("%s is listed without --transactions", tl.Name)
		}
		if tl.Name == "exec" {
			b, _ := json.Marshal(tl.InputSchema)
			var s struct{ Properties map[string]any }
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			for p := range s.Properties {
				execProps = append(execProps, p)
			}
		}
	}
	if len(list.Tools) != 15 {
		t.Errorf("%d tools listed, want the reference's 15", len(list.Tools))
	}
	slices.Sort(execProps)
	if want := []string{"command", "cwd", "env", "stderr", "timeout"}; !slices.Equal(execProps, want) {
		t.Errorf("exec's properties = %v, want %v", execProps, want)
	}
	if _, body := get(t, r.url+"/health"); strings.Contains(string(body), `"transactions"`) {
		t.Errorf("/health = %s", body)
	}
	for i, tx := range []any{true, "yes", 1} {
		name := "ran" + strconv.Itoa(i)
		text, _, isErr := callTool(t, cs, "exec", map[string]any{"command": "touch " + name, "transaction": tx})
		if !isErr || !strings.Contains(text, "--transactions") || !strings.Contains(text, "did not run") {
			t.Errorf("transaction %v: error %v: %s", tx, isErr, text)
		}
		if _, err := os.Lstat(filepath.Join(c.Root, name)); !os.IsNotExist(err) {
			t.Errorf("transaction %v: the command ran on the workspace", tx)
		}
	}
	if text, _, isErr := callTool(t, cs, "exec", map[string]any{"command": "touch plain", "transaction": false}); isErr {
		t.Fatal(text)
	}
	if _, err := os.Lstat(filepath.Join(c.Root, "plain")); err != nil {
		t.Errorf("exec with transaction false: %v", err)
	}

	mem := testConfig(t)
	mem.Backend, mem.Transactions = "memory", true
	must(t, mem.Validate())
	if d, err := New(mem, Options{}); err == nil || !strings.Contains(err.Error(), "--transactions") {
		if err == nil {
			d.Close()
		}
		t.Errorf("--transactions with the memory backend: %v", err)
	}
}

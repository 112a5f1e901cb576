package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// askFixture is a gateway whose system.run waits for the operator on
// every miss (allowlist mode, empty allowlist, ask on-miss), with two
// scopes of its workspace, a and b.
func askFixture(t *testing.T) (f *fixture, ap *Approvals, a, b fsops.Workspace) {
	t.Helper()
	f = setup(t, func(o *Options) {
		var err error
		ap, err = LoadApprovals("", ModeAllowlist, AskOnMiss, o.Workspace.Root(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		o.Approvals = ap
	})
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(f.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var rel func()
	var err error
	if a, rel, err = fsops.WorkDir(f.ws, "a"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel)
	if b, rel, err = fsops.WorkDir(f.ws, "b"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rel)
	return f, ap, a, b
}

// callIn calls a tool as a caller whose workspace is ws (a scope-bound
// token's, or a request's X-Scope-Path).
func (f *fixture) callIn(t *testing.T, ws fsops.Workspace, tool, args string) (string, bool, errcode.Code) {
	t.Helper()
	res, err := f.reg.Call(context.Background(), tool, registry.Call{Args: json.RawMessage(args), Workspace: ws})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError, registry.Code(res)
}

// TestAttackApprovalFlood: a client sending calls that miss the allowlist
// makes requests wait for the operator; they are bounded per workspace
// (MaxPendingPerWorkspace), in all (MaxPending), and in size
// (MaxPendingBytes): past a bound the call is refused and nothing is
// stored, and one workspace's flood leaves another workspace its own.
func TestAttackApprovalFlood(t *testing.T) {
	f, ap, a, b := askFixture(t)
	for i := range MaxPendingPerWorkspace + 8 {
		txt, isErr, _ := f.callIn(t, a, "system.run", `{"argv":["true"]}`)
		switch {
		case i < MaxPendingPerWorkspace && (isErr || pendingID(txt) == ""):
			t.Fatalf("call %d: want a pending request, got %s", i, txt)
		case i >= MaxPendingPerWorkspace && (!isErr || !strings.Contains(txt, "already wait for the operator")):
			t.Fatalf("call %d: want a refusal past the bound, got %s", i, txt)
		}
	}
	if n := len(ap.List()); n != MaxPendingPerWorkspace {
		t.Errorf("%d requests wait; want %d", n, MaxPendingPerWorkspace)
	}
	// Another workspace still asks.
	if txt, _, _ := f.callIn(t, b, "system.run", `{"argv":["true"]}`); pendingID(txt) == "" {
		t.Errorf("scope b after scope a's flood: %s", txt)
	}
	// A request too large to hold is refused, not stored.
	big := strings.Repeat("x", MaxPendingBytes)
	if txt, isErr, _ := f.callIn(t, b, "system.run", `{"argv":["echo",`+strconvQuote(big)+`]}`); !isErr || !strings.Contains(txt, "may hold") {
		t.Errorf("an oversized request: %.200s", txt)
	}
	if n := len(ap.List()); n != MaxPendingPerWorkspace+1 {
		t.Errorf("%d requests wait; want %d", n, MaxPendingPerWorkspace+1)
	}
	// The global bound: workspaces of their own, each under its bound.
	ap.mu.Lock()
	for i := 0; len(ap.pending) < MaxPending; i++ {
		ap.newPending("/elsewhere/"+strconv.Itoa(i), RunRequest{Argv: []string{"true"}}, "filler")
	}
	ap.mu.Unlock()
	if txt, isErr, _ := f.callIn(t, b, "system.run", `{"argv":["true"]}`); !isErr || !strings.Contains(txt, "requests already wait for the operator") {
		t.Errorf("past the global bound: %s", txt)
	}
	// Expiry frees the places.
	ap.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if txt, _, _ := f.callIn(t, a, "system.run", `{"argv":["true"]}`); pendingID(txt) == "" {
		t.Errorf("after expiry: %s", txt)
	}
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestAttackApprovalOtherScope: a request approved for scope a is taken
// by a caller of a only. A caller of scope b, or of the whole root, that
// learned the id gets "no such request", and the approval stays for a (it
// is not used up by the attempt); a then runs it once.
func TestAttackApprovalOtherScope(t *testing.T) {
	f, ap, a, b := askFixture(t)
	txt, _, _ := f.callIn(t, a, "system.run", `{"argv":["printf","%s","ran in a"]}`)
	id := pendingID(txt)
	if id == "" {
		t.Fatalf("no pending request: %s", txt)
	}
	if _, err := ap.Decide(id, true, false); err != nil {
		t.Fatal(err)
	}
	for name, ws := range map[string]fsops.Workspace{"scope b": b, "the root": f.ws} {
		if txt, isErr, _ := f.callIn(t, ws, "system.run", `{"requestId":"`+id+`"}`); !isErr || !strings.Contains(txt, "no such request") {
			t.Errorf("%s took scope a's approval: %s", name, txt)
		}
	}
	if txt, isErr, _ := f.callIn(t, a, "system.run", `{"requestId":"`+id+`"}`); isErr || !strings.Contains(txt, `"stdout":"ran in a"`) {
		t.Errorf("scope a's approved run: %s", txt)
	}
	if txt, isErr, _ := f.callIn(t, a, "system.run", `{"requestId":"`+id+`"}`); !isErr || !strings.Contains(txt, "no such request") {
		t.Errorf("a second run: %s", txt)
	}
	// An id nobody was given: unknown, to every caller.
	for _, guess := range []string{"", "0", strings.Repeat("0", 24), id + "0", strings.ToUpper(id), "../" + id} {
		if _, err := ap.Take(guess, a.Root()); err != ErrNoRequest {
			t.Errorf("Take(%q): %v", guess, err)
		}
		if _, err := ap.Decide(guess, true, false); err != ErrNoRequest {
			t.Errorf("Decide(%q): %v", guess, err)
		}
	}
}

// TestAttackApproveOwnCall: the agent's token cannot decide its own
// request on the REST face (401, and the request still waits), whatever
// the method or path it tries.
func TestAttackApproveOwnCall(t *testing.T) {
	f, ap, a, _ := askFixture(t)
	txt, _, _ := f.callIn(t, a, "system.run", `{"argv":["true"]}`)
	id := pendingID(txt)
	if id == "" {
		t.Fatalf("no pending request: %s", txt)
	}
	h := ap.ApprovalsHandler(func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer operator" }, nil)
	for _, tc := range []struct{ method, path, auth string }{
		{"POST", "/approvals/" + id, "Bearer agent"},
		{"POST", "/approvals/" + id, ""},
		{"PUT", "/approvals/" + id, "Bearer agent"},
		{"POST", "/approvals//" + id, "Bearer agent"},
		{"GET", "/approvals", "Bearer agent"},
	} {
		req := httptest.NewRequest(tc.method, "http://d"+tc.path, strings.NewReader(`{"approved":true,"always":true}`))
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("%s %s with %q: %d %s", tc.method, tc.path, tc.auth, rec.Code, rec.Body)
		}
	}
	if l := ap.List(); len(l) != 1 || l[0].State != "pending" {
		t.Errorf("after the agent's tries: %+v", l)
	}
	// A body over its bound, or with an unknown key, decides nothing.
	for _, body := range []string{`{"approved":true,"x":1}`, `{"always":true}`, `{"approved":"yes"}`, `{"approved":` + strings.Repeat(" ", 8192) + `true}`} {
		req := httptest.NewRequest("POST", "http://d/approvals/"+id, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer operator")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusOK {
			t.Errorf("body %.40q: %d %s", body, rec.Code, rec.Body)
		}
	}
	if l := ap.List(); len(l) != 1 || l[0].State != "pending" {
		t.Errorf("after malformed decisions: %+v", l)
	}
}

// TestAttackFSConfinement: the file tools of a caller bound to scope a
// reach nothing outside it (another scope, the root, the host) by "..",
// an absolute path, a link planted in the scope, or a glob; a FIFO is
// refused rather than waited on; a read-only caller's workspace writes
// nothing, and its system.run is refused before anything runs.
func TestAttackFSConfinement(t *testing.T) {
	f, _, a, _ := askFixture(t)
	os.WriteFile(filepath.Join(f.root, "b", "secret"), []byte("B-SECRET"), 0o644)
	os.WriteFile(filepath.Join(f.root, "top"), []byte("ROOT-SECRET"), 0o644)
	os.Symlink("../b", filepath.Join(f.root, "a", "tob"))
	os.Symlink("/etc", filepath.Join(f.root, "a", "etc"))
	os.Symlink(filepath.Join(f.root, "b", "secret"), filepath.Join(f.root, "a", "abs"))
	if err := syscall.Mkfifo(filepath.Join(f.root, "a", "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ tool, args string }{
		{"fs.read", `{"path":"../b/secret"}`},
		{"fs.read", `{"path":"../top"}`},
		{"fs.read", `{"path":"tob/secret"}`},
		{"fs.read", `{"path":"abs"}`},
		{"fs.read", `{"path":"etc/passwd"}`},
		{"fs.read", `{"path":"/../b/secret"}`},
		{"fs.read", `{"path":"fifo"}`},
		{"fs.read", `{"path":null}`},
		{"fs.write", `{"path":"tob/planted","content":"x"}`},
		{"fs.write", `{"path":"../b/planted","content":"x"}`},
		{"fs.write", `{"path":"etc/planted","content":"x"}`},
		{"fs.list", `{"path":"tob"}`},
		{"fs.list", `{"path":".."}`},
		{"fs.glob", `{"pattern":"*","path":"tob"}`},
		{"system.run", `{"argv":["cat","secret"],"cwd":"tob"}`},
		{"system.run", `{"argv":["../b/secret"]}`},
	} {
		txt, isErr, _ := f.callIn(t, a, tc.tool, tc.args)
		if !isErr || strings.Contains(txt, "SECRET") {
			t.Errorf("%s %s: %.200s", tc.tool, tc.args, txt)
		}
	}
	// A glob or a listing of the scope names what is in it, nothing else.
	for _, args := range []string{`{"pattern":"**"}`, `{"pattern":"/**"}`, `{"pattern":"../**"}`, `{"pattern":"../b/*"}`, `{"pattern":"**/secret"}`} {
		if txt, _, _ := f.callIn(t, a, "fs.glob", args); strings.Contains(txt, "secret") || strings.Contains(txt, "passwd") {
			t.Errorf("fs.glob %s: %s", args, txt)
		}
	}
	if txt, _, _ := f.callIn(t, a, "fs.list", `{"recursive":true}`); strings.Contains(txt, "secret") || strings.Contains(txt, "passwd") {
		t.Errorf("fs.list: %s", txt)
	}
	for _, p := range []string{"b/planted", "planted", "a/planted"} {
		if _, err := os.Stat(filepath.Join(f.root, p)); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	// Read-only: the workspace refuses every change; a registry call with
	// ReadOnly refuses system.run (it runs commands).
	ro := fsops.ReadOnly(a)
	for _, args := range []string{`{"path":"new.txt","content":"x"}`, `{"path":"sub/new.txt","content":"x"}`} {
		if txt, isErr, _ := f.callIn(t, ro, "fs.write", args); !isErr {
			t.Errorf("read-only fs.write %s: %s", args, txt)
		}
	}
	res, err := f.reg.Call(context.Background(), "system.run", registry.Call{Args: json.RawMessage(`{"argv":["touch","ro-ran"]}`), Workspace: ro, ReadOnly: true})
	if err != nil || !res.IsError {
		t.Errorf("read-only system.run: %v %+v", err, res)
	}
	for _, p := range []string{"a/new.txt", "a/sub", "a/ro-ran", "ro-ran"} {
		if _, err := os.Stat(filepath.Join(f.root, p)); err == nil {
			t.Errorf("read-only: %s was written", p)
		}
	}
}

// TestAttackSystemRunArguments: system.run's arguments reach the program
// as sent, byte for byte, whatever they hold (shell syntax, newlines,
// option-looking text); the program is the file argv[0] resolved to, never
// one a later argument or the environment names; the denylist sees
// through newlines; an argument past the kernel's bound runs nothing.
func TestAttackSystemRunArguments(t *testing.T) {
	policy := policyFile(t, `{"allowlist":{"commands":["printf"]},"denylist":{"patterns":["rm\\s+-rf"]}}`)
	f := setup(t, func(o *Options) { o.Approvals, _ = LoadApprovals(policy, ModeAllowlist, AskOff, o.Workspace.Root(), 0) })
	for _, v := range []string{
		"; touch pwned", "$(touch pwned)", "`touch pwned`", "a\ntouch pwned", "'; touch pwned; '", `"; touch pwned"`,
		"$HOME", "${IFS}", "*", "~", "--version", "-v", "--", "\uff0fetc\uff0fpasswd", "e\u0301", "\x1b[2J",
		strings.Repeat("x", 100<<10),
	} {
		args, _ := json.Marshal(map[string]any{"argv": []string{"printf", "%s|", v}})
		txt, isErr, _ := f.call(t, "system.run", string(args))
		var out struct {
			ExitCode int    `json:"exitCode"`
			Stdout   string `json:"stdout"`
		}
		if err := json.Unmarshal([]byte(txt), &out); isErr || err != nil || out.Stdout != v+"|" || out.ExitCode != 0 {
			t.Errorf("%.40q: %.200s", v, txt)
		}
	}
	for _, tc := range []struct{ args, want string }{
		// Resolved by argv[0] only: an option-looking or shell-looking
		// program name is no program.
		{`{"argv":["--version"]}`, "not found on the PATH"},
		{`{"argv":["printf;id"]}`, "not found on the PATH"},
		{`{"argv":["$(id)"]}`, "not found on the PATH"},
		// The denylist matches across a newline (\s), as sent or resolved.
		{`{"argv":["printf","rm\n-rf"]}`, "denylist"},
		// A NUL, or an argument over the kernel's 128 KiB bound.
		{`{"argv":["printf","a\u0000b"]}`, "NUL"},
		{`{"argv":["printf","%s","` + strings.Repeat("x", 1<<20) + `"]}`, ""},
		// The environment cannot choose the program: PATH misses the
		// allowlist (ask off: refused).
		{`{"argv":["printf","x"],"env":{"PATH":"."}}`, "PATH"},
	} {
		if txt, isErr, _ := f.call(t, "system.run", tc.args); !isErr || !strings.Contains(txt, tc.want) {
			t.Errorf("%.60s: %.200s", tc.args, txt)
		}
	}
	if _, err := os.Stat(filepath.Join(f.root, "pwned")); err == nil {
		t.Fatal("an argument ran a command")
	}
}

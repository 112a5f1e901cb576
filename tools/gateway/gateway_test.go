package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	reg  *registry.Registry
	ws   fsops.Workspace
	root string
	p    *Provider
}

func setup(t *testing.T, mod func(*Options)) *fixture {
	t.Helper()
	root := t.TempDir()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	exe, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exe.Close() })
	opts := Options{Workspace: ws, Executor: exe}
	if mod != nil {
		mod(&opts)
	}
	p := New(opts)
	t.Cleanup(func() { p.Close() })
	reg := registry.New(registry.Options{})
	if err := reg.Set("gateway", p.Tools()); err != nil {
		t.Fatal(err)
	}
	return &fixture{reg: reg, ws: ws, root: ws.Root(), p: p}
}

func (f *fixture) call(t *testing.T, tool, args string) (string, bool, errcode.Code) {
	t.Helper()
	res, err := f.reg.Call(context.Background(), tool, registry.Call{Args: json.RawMessage(args), Workspace: f.ws})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res.Content[0].(*mcp.TextContent).Text, res.IsError, registry.Code(res)
}

func allowServer(t *testing.T, h http.Handler) (*httptest.Server, *netguard.Client) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	c := netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}, MaxBodyBytes: 1000})
	t.Cleanup(c.CloseIdleConnections)
	return srv, c
}

func TestHTTPRequest(t *testing.T) {
	srv, net := allowServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/text":
			w.Header().Set("X-Seen", r.URL.Query().Get("q")+"|"+r.Header.Get("X-Test"))
			w.Write([]byte("hello"))
		case "/binary":
			w.Write([]byte{0xff, 0x00, 0xfe})
		case "/big":
			w.Write([]byte(strings.Repeat("x", 5000)))
		case "/to-private":
			http.Redirect(w, r, "http://10.1.2.3/", http.StatusFound)
		}
	}))
	f := setup(t, func(o *Options) { o.Net = net })
	var res requestResult
	txt, isErr, _ := f.call(t, "http.request", `{"method":"GET","url":"`+srv.URL+`/text","query":{"q":"1"},"headers":{"X-Test":"yes"}}`)
	if err := json.Unmarshal([]byte(txt), &res); err != nil || isErr || res.Status != 200 || res.Body != "hello" || res.Headers["x-seen"] != "1|yes" || res.BodyEncoding != "text" {
		t.Errorf("text: %s", txt)
	}
	txt, _, _ = f.call(t, "http.request", `{"method":"GET","url":"`+srv.URL+`/binary"}`)
	json.Unmarshal([]byte(txt), &res)
	if b, _ := base64.StdEncoding.DecodeString(res.Body); res.BodyEncoding != "base64" || string(b) != "\xff\x00\xfe" {
		t.Errorf("binary: %s", txt)
	}
	txt, _, _ = f.call(t, "http.request", `{"method":"GET","url":"`+srv.URL+`/big"}`)
	json.Unmarshal([]byte(txt), &res)
	if !res.Truncated || len(res.Body) != 1000 {
		t.Errorf("big: truncated=%v %d bytes", res.Truncated, len(res.Body))
	}
	strict := setup(t, nil)
	for _, u := range []string{"http://127.0.0.1/", "http://169.254.169.254/latest/meta-data/", "http://0x7f.1/", "file:///etc/passwd", "http://[::1]/", srv.URL + "/to-private"} {
		txt, isErr, code := strict.call(t, "http.request", `{"method":"GET","url":"`+u+`"}`)
		if !isErr || code != errcode.InvalidArgument || !strings.Contains(txt, "refused") {
			t.Errorf("%s: %q %v %s", u, txt, isErr, code)
		}
	}
	if txt, isErr, _ := f.call(t, "http.request", `{"method":"GET","url":"`+srv.URL+`/to-private"}`); !isErr || !strings.Contains(txt, "refused") {
		t.Errorf("redirect to a private address: %q", txt)
	}
}

// TestDownloadIsAtomic: a body cut short by the server, or over the cap,
// leaves no file; a whole one is written.
func TestDownloadIsAtomic(t *testing.T) {
	srv, net := allowServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write([]byte("payload"))
		case "/cut":
			w.Header().Set("Content-Length", "500")
			w.Write([]byte("only part"))
			if hj, ok := w.(http.Hijacker); ok {
				c, _, _ := hj.Hijack()
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
		case "/big":
			w.Write([]byte(strings.Repeat("x", 5000)))
		}
	}))
	f := setup(t, func(o *Options) { o.Net = net })
	if txt, isErr, _ := f.call(t, "http.download", `{"url":"`+srv.URL+`/ok","destPath":"dl/file.bin"}`); isErr || !strings.Contains(txt, `"bytes":7`) {
		t.Errorf("ok: %s", txt)
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "dl/file.bin")); string(b) != "payload" {
		t.Errorf("written: %q", b)
	}
	for _, path := range []string{"/cut", "/big"} {
		txt, isErr, _ := f.call(t, "http.download", `{"url":"`+srv.URL+path+`","destPath":"dl/`+path[1:]+`.bin"}`)
		if !isErr {
			t.Errorf("%s: %s", path, txt)
		}
		if _, err := os.Stat(filepath.Join(f.root, "dl", path[1:]+".bin")); err == nil {
			t.Errorf("%s left a file", path)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(f.root, "dl"))
	if len(entries) != 1 {
		t.Errorf("dl holds %d entries (a temp file left?)", len(entries))
	}
	if txt, isErr, code := f.call(t, "http.download", `{"url":"`+srv.URL+`/ok","destPath":"../out.bin"}`); !isErr || code != errcode.PathEscapeAttempt {
		t.Errorf("escape: %s %s", txt, code)
	}
}

func TestFSTools(t *testing.T) {
	f := setup(t, func(o *Options) { o.MaxFileBytes = 100 })
	for _, tc := range []struct {
		tool, args, want string
		isErr            bool
	}{
		{"fs.write", `{"path":"a/b.txt","content":"hi"}`, `{"bytes":2,"path":"a/b.txt","success":true}`, false},
		{"fs.read", `{"path":"a/b.txt"}`, `{"content":"hi","encoding":"utf8","size":2}`, false},
		{"fs.write", `{"path":"bin","content":"/wA=","encoding":"base64"}`, `"bytes":2`, false},
		{"fs.read", `{"path":"bin"}`, `{"content":"/wA=","encoding":"base64","size":2}`, false},
		{"fs.list", `{}`, `{"entries":[{"path":"a","type":"dir","size":`, false},
		{"fs.list", `{"recursive":true}`, `{"path":"a/b.txt","type":"file","size":2}`, false},
		{"fs.glob", `{"pattern":"**/*.txt"}`, `{"paths":["a/b.txt"],"truncated":false}`, false},
		{"fs.write", `{"path":"big","content":"` + strings.Repeat("x", 101) + `"}`, "the limit is 100", true},
		{"fs.write", `{"path":"x","content":"y","atomic":false}`, "always atomic", true},
		{"fs.read", `{"path":"../../etc/passwd"}`, "escapes", true},
		{"fs.read", `{"path":"a"}`, "is a directory", true},
		{"fs.read", `{"path":"a/b.txt","extra":1}`, "unknown field", true},
		{"fs.delete", `{"path":"a/b.txt"}`, "--fs-delete", true},
	} {
		txt, isErr, _ := f.call(t, tc.tool, tc.args)
		if isErr != tc.isErr || !strings.Contains(txt, tc.want) {
			t.Errorf("%s %s: %q isError=%v; want %q", tc.tool, tc.args, txt, isErr, tc.want)
		}
	}
	g := setup(t, func(o *Options) { o.AllowDelete = true })
	g.call(t, "fs.write", `{"path":"gone.txt","content":"x"}`)
	if txt, isErr, _ := g.call(t, "fs.delete", `{"path":"gone.txt"}`); isErr {
		t.Errorf("delete: %s", txt)
	}
	if _, err := os.Stat(filepath.Join(g.root, "gone.txt")); err == nil {
		t.Error("not deleted")
	}
}

func policyFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "exec-approvals.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSystemRunApprovals walks the approval rules end to end.
func TestSystemRunApprovals(t *testing.T) {
	policy := policyFile(t, `{"allowlist":{"commands":["echo"],"cwdPrefix":["$workspaceRoot"]},"denylist":{"patterns":["rm\\s+-rf","sudo"]}}`)
	var ap *Approvals
	f := setup(t, func(o *Options) {
		var err error
		ap, err = LoadApprovals(policy, ModeAllowlist, AskOnMiss, o.Workspace.Root(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		o.Approvals = ap
	})
	// Allowed: on the allowlist, in the workspace.
	if txt, isErr, _ := f.call(t, "system.run", `{"argv":["echo","hi"]}`); isErr || !strings.Contains(txt, `"stdout":"hi\n"`) || !strings.Contains(txt, `"exitCode":0`) {
		t.Errorf("allowed: %s", txt)
	}
	// Denied by pattern, in every mode.
	if txt, isErr, code := f.call(t, "system.run", `{"argv":["echo","rm","-rf","/"]}`); !isErr || code != errcode.DangerousOperation || !strings.Contains(txt, "denylist") {
		t.Errorf("denylist: %s", txt)
	}
	// A miss waits for the operator.
	txt, isErr, _ := f.call(t, "system.run", `{"argv":["printf","%s","approved run"]}`)
	var pend struct{ Status, RequestID string }
	json.Unmarshal([]byte(strings.SplitN(txt, "\n", 2)[0]), &pend)
	if isErr || pend.Status != "approval-pending" || pend.RequestID == "" {
		t.Fatalf("miss: %s", txt)
	}
	if l := ap.List(); len(l) != 1 || l[0].Request.Argv[0] != "printf" {
		t.Errorf("pending: %+v", l)
	}
	// Not yet approved: the id does not run.
	if txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+pend.RequestID+`"}`); !isErr || !strings.Contains(txt, "still waiting") {
		t.Errorf("before approval: %s", txt)
	}
	if _, err := ap.Decide(pend.RequestID, true, false); err != nil {
		t.Fatal(err)
	}
	// Replay with other arguments is refused (and uses the approval up).
	if txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+pend.RequestID+`","argv":["printf","%s","something else"]}`); !isErr || !strings.Contains(txt, "runs only as approved") {
		t.Errorf("changed replay: %s", txt)
	}
	// Approve again and run the stored request once.
	txt, _, _ = f.call(t, "system.run", `{"argv":["printf","%s","approved run"]}`)
	json.Unmarshal([]byte(strings.SplitN(txt, "\n", 2)[0]), &pend)
	ap.Decide(pend.RequestID, true, false)
	if txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+pend.RequestID+`"}`); isErr || !strings.Contains(txt, `"stdout":"approved run"`) {
		t.Errorf("approved: %s", txt)
	}
	if txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+pend.RequestID+`"}`); !isErr || !strings.Contains(txt, "no such request") {
		t.Errorf("second use: %s", txt)
	}
	// Denied by the operator.
	txt, _, _ = f.call(t, "system.run", `{"argv":["true"]}`)
	json.Unmarshal([]byte(strings.SplitN(txt, "\n", 2)[0]), &pend)
	ap.Decide(pend.RequestID, false, false)
	if txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+pend.RequestID+`"}`); !isErr || !strings.Contains(txt, "no such request") {
		t.Errorf("denied: %s", txt)
	}
	// Expired.
	txt, _, _ = f.call(t, "system.run", `{"argv":["true"]}`)
	json.Unmarshal([]byte(strings.SplitN(txt, "\n", 2)[0]), &pend)
	ap.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if _, err := ap.Decide(pend.RequestID, true, false); err != ErrNoRequest {
		t.Errorf("expired: %v", err)
	}
	ap.now = time.Now
	// Always: persisted, and the next call runs without asking.
	txt, _, _ = f.call(t, "system.run", `{"argv":["true"]}`)
	json.Unmarshal([]byte(strings.SplitN(txt, "\n", 2)[0]), &pend)
	if _, err := ap.Decide(pend.RequestID, true, true); err != nil {
		t.Fatal(err)
	}
	saved, _ := os.ReadFile(policy)
	trueExe, _ := sandbox.LookPath("true", nil)
	trueExe, _ = filepath.EvalSymlinks(trueExe)
	if !strings.Contains(string(saved), trueExe) {
		t.Errorf("the always rule is not in the file:\n%s", saved)
	}
	if txt, isErr, _ := f.call(t, "system.run", `{"argv":["true"]}`); isErr || !strings.Contains(txt, `"exitCode":0`) {
		t.Errorf("after always: %s", txt)
	}
	// Outside the workspace.
	if txt, isErr, _ := f.call(t, "system.run", `{"argv":["echo"],"cwd":"../.."}`); !isErr || !strings.Contains(txt, "escapes") {
		t.Errorf("cwd outside: %s", txt)
	}
}

// TestSystemRunModes: deny refuses everything; full lets the sandbox's
// policy judge (sudo refused there); no policy at all refuses.
func TestSystemRunModes(t *testing.T) {
	deny := setup(t, func(o *Options) { o.Approvals, _ = LoadApprovals("", ModeDeny, AskOff, o.Workspace.Root(), 0) })
	if txt, isErr, _ := deny.call(t, "system.run", `{"argv":["echo"]}`); !isErr || !strings.Contains(txt, "off") {
		t.Errorf("deny: %s", txt)
	}
	full := setup(t, func(o *Options) { o.Approvals, _ = LoadApprovals("", ModeFull, AskOff, o.Workspace.Root(), 0) })
	if txt, isErr, _ := full.call(t, "system.run", `{"argv":["ls"]}`); isErr {
		t.Errorf("full: %s", txt)
	}
	if txt, isErr, code := full.call(t, "system.run", `{"argv":["su","root"]}`); !isErr || code != errcode.DangerousOperation {
		t.Errorf("full, su: %s %s", txt, code)
	}
	none := setup(t, nil)
	if txt, isErr, _ := none.call(t, "system.run", `{"argv":["echo"]}`); !isErr || !strings.Contains(txt, "no approval policy") {
		t.Errorf("no policy: %s", txt)
	}
	if _, err := LoadApprovals("", "maybe", AskOff, "/", 0); err == nil {
		t.Error("a bad mode was accepted")
	}
	if _, err := LoadApprovals(policyFile(t, `{"denylist":{"patterns":["("]}}`), ModeFull, AskOff, "/", 0); err == nil || !strings.Contains(err.Error(), "denylist.patterns[0]") {
		t.Errorf("a bad pattern: %v", err)
	}
	// A second object after the first (a denylist appended) fails the
	// file rather than being ignored.
	if _, err := LoadApprovals(policyFile(t, `{"allowlist":{"commands":["echo"]}}`+"\n"+`{"denylist":{"patterns":["echo"]}}`), ModeFull, AskOff, "/", 0); err == nil || !strings.Contains(err.Error(), "more after the policy's object") {
		t.Errorf("a second object: %v", err)
	}
}

// TestSystemRunEnvNeedsApproval: an allowlisted program with a variable
// that can make it run other code (git with GIT_CONFIG_*: core.fsmonitor
// runs any command) is not allowed by the allowlist alone: it waits for the
// operator (ask on-miss) or is refused (ask off); without such a variable
// the allowlist alone lets it run.
func TestSystemRunEnvNeedsApproval(t *testing.T) {
	policy := policyFile(t, `{"allowlist":{"commands":["git","echo"],"cwdPrefix":["$workspaceRoot"]}}`)
	for _, ask := range []string{AskOnMiss, AskOff} {
		t.Run(ask, func(t *testing.T) {
			f := setup(t, func(o *Options) {
				var err error
				if o.Approvals, err = LoadApprovals(policy, ModeAllowlist, ask, o.Workspace.Root(), time.Minute); err != nil {
					t.Fatal(err)
				}
			})
			txt, isErr, _ := f.call(t, "system.run", `{"argv":["git","status"],"env":{"GIT_CONFIG_COUNT":"1","GIT_CONFIG_KEY_0":"core.fsmonitor","GIT_CONFIG_VALUE_0":"touch pwned"}}`)
			switch ask {
			case AskOnMiss:
				if isErr || !strings.Contains(txt, "approval-pending") || !strings.Contains(txt, "can make the command run other code") {
					t.Errorf("on-miss: %s", txt)
				}
			case AskOff:
				if !isErr || !strings.Contains(txt, "can make the command run other code") {
					t.Errorf("off: %s", txt)
				}
			}
			if txt, isErr, _ := f.call(t, "system.run", `{"argv":["echo","plain"],"env":{"TZ":"UTC"}}`); isErr || !strings.Contains(txt, `"stdout":"plain\n"`) {
				t.Errorf("an ordinary variable: %s", txt)
			}
		})
	}
}

// pendingID is the requestId of an approval-pending answer ("" when the
// answer is something else).
func pendingID(txt string) string {
	var pend struct{ Status, RequestID string }
	json.Unmarshal([]byte(strings.SplitN(txt, "\n", 2)[0]), &pend)
	if pend.Status != "approval-pending" {
		return ""
	}
	return pend.RequestID
}

// plant writes an executable script into the workspace that leaves a mark
// when it runs.
func plant(t *testing.T, root, rel, body string) string {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSystemRunPathIntoWorkspace: an allowlisted git with env PATH leading
// into the workspace, where a bin/git was planted, does not run the planted
// one without approval: the program is resolved with the PATH the command
// gets (absolute, relative and empty entries alike), and a request that
// sets PATH misses the allowlist; the approval shows the file it resolved
// to, and what runs once approved is that file.
func TestSystemRunPathIntoWorkspace(t *testing.T) {
	policy := policyFile(t, `{"allowlist":{"commands":["git"],"cwdPrefix":["$workspaceRoot"]}}`)
	var ap *Approvals
	f := setup(t, func(o *Options) {
		var err error
		if ap, err = LoadApprovals(policy, ModeAllowlist, AskOnMiss, o.Workspace.Root(), time.Minute); err != nil {
			t.Fatal(err)
		}
		o.Approvals = ap
	})
	planted := plant(t, f.root, "bin/git", "echo planted; touch pwned")
	for _, tc := range []struct{ name, path, cwd string }{
		{"absolute", f.root + "/bin:/usr/bin:/bin", ""},
		{"relative", "bin:/usr/bin:/bin", ""},
		{"empty entry", ":/usr/bin:/bin", "bin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]any{"argv": []string{"git", "--version"}, "cwd": tc.cwd, "env": map[string]string{"PATH": tc.path}})
			txt, isErr, _ := f.call(t, "system.run", string(args))
			if _, err := os.Stat(filepath.Join(f.root, tc.cwd, "pwned")); err == nil || strings.Contains(txt, "planted") {
				t.Fatalf("the planted git ran without approval: %s", txt)
			}
			id := pendingID(txt)
			if isErr || id == "" || !strings.Contains(txt, "is in the workspace") {
				t.Fatalf("not a pending approval of a workspace program: %s", txt)
			}
			var shown RunRequest
			for _, p := range ap.List() {
				if p.ID == id {
					shown = p.Request
				}
			}
			if shown.Exe != planted {
				t.Errorf("the approval shows %q, want the file that would run, %s", shown.Exe, planted)
			}
			ap.Decide(id, false, false)
		})
	}
	// A PATH of system directories only still misses the allowlist: it
	// also chooses what git starts by name.
	txt, _, _ := f.call(t, "system.run", `{"argv":["git","--version"],"env":{"PATH":"/usr/bin:/bin"}}`)
	if pendingID(txt) == "" || !strings.Contains(txt, "env sets PATH") {
		t.Errorf("PATH set: %s", txt)
	}
	// Approved with the planted file shown: that file is what runs.
	txt, _, _ = f.call(t, "system.run", `{"argv":["git","--version"],"env":{"PATH":"bin:/usr/bin"}}`)
	id := pendingID(txt)
	if _, err := ap.Decide(id, true, false); err != nil {
		t.Fatal(err)
	}
	if txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+id+`"}`); isErr || !strings.Contains(txt, `"stdout":"planted\n"`) {
		t.Errorf("approved: %s", txt)
	}
	// Without PATH the allowlisted git runs, by its absolute path.
	if txt, isErr, _ := f.call(t, "system.run", `{"argv":["git","--version"]}`); isErr || !strings.Contains(txt, "git version") {
		t.Errorf("allowlisted: %s", txt)
	}
}

// TestSystemRunRunsTheJudgedFile: a program is judged as the file its
// links lead to and run by that file's absolute path, so retargeting a
// workspace link named git after the approval changes nothing; variables
// that take over the dynamic linker never reach the program.
func TestSystemRunRunsTheJudgedFile(t *testing.T) {
	var ap *Approvals
	f := setup(t, func(o *Options) {
		var err error
		if ap, err = LoadApprovals("", ModeFull, AskAlways, o.Workspace.Root(), time.Minute); err != nil {
			t.Fatal(err)
		}
		o.Approvals = ap
	})
	git, err := sandbox.LookPath("git", nil)
	if err != nil {
		t.Skip("no git")
	}
	git, _ = filepath.EvalSymlinks(git)
	link := filepath.Join(f.root, "git")
	if err := os.Symlink(git, link); err != nil {
		t.Fatal(err)
	}
	txt, _, _ := f.call(t, "system.run", `{"argv":["./git","--version"]}`)
	id := pendingID(txt)
	if l := ap.List(); len(l) != 1 || l[0].Request.Exe != git {
		t.Fatalf("pending: %+v (%s)", l, txt)
	}
	if _, err := ap.Decide(id, true, false); err != nil {
		t.Fatal(err)
	}
	planted := plant(t, f.root, "planted.sh", "echo planted; touch pwned")
	os.Remove(link)
	if err := os.Symlink(planted, link); err != nil {
		t.Fatal(err)
	}
	txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+id+`"}`)
	if _, err := os.Stat(filepath.Join(f.root, "pwned")); err == nil || isErr || !strings.Contains(txt, "git version") {
		t.Errorf("after the link was retargeted: %s", txt)
	}
	// LD_PRELOAD and BASH_ENV are dropped by the sandbox's env rules.
	txt, _, _ = f.call(t, "system.run", `{"argv":["env"],"env":{"LD_PRELOAD":"/nonexistent.so","BASH_ENV":"/x","TZ":"UTC"}}`)
	ap.Decide(pendingID(txt), true, false)
	if txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+pendingID(txt)+`"}`); isErr || strings.Contains(txt, "LD_PRELOAD") || strings.Contains(txt, "BASH_ENV") || !strings.Contains(txt, "TZ=UTC") {
		t.Errorf("env: %s", txt)
	}
}

// TestSystemRunApprovalBindsContent: an approval of a program in the
// workspace binds its content: the pending request shows its sha256, and a
// build.sh rewritten between the approval and the run does not run (the
// run is refused naming both digests); unchanged, the approved content
// runs.
func TestSystemRunApprovalBindsContent(t *testing.T) {
	var ap *Approvals
	f := setup(t, func(o *Options) {
		var err error
		if ap, err = LoadApprovals(policyFile(t, `{"allowlist":{"commands":["echo"]}}`), ModeAllowlist, AskOnMiss, o.Workspace.Root(), time.Minute); err != nil {
			t.Fatal(err)
		}
		o.Approvals = ap
	})
	approved := "#!/bin/sh\necho approved \"$@\"\n"
	if err := os.WriteFile(filepath.Join(f.root, "build.sh"), []byte(approved), 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(approved))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	ask := func() string {
		t.Helper()
		txt, _, _ := f.call(t, "system.run", `{"argv":["./build.sh","x"]}`)
		id := pendingID(txt)
		if id == "" {
			t.Fatalf("not pending: %s", txt)
		}
		return id
	}
	id := ask()
	listed, _ := json.Marshal(ap.List())
	if !strings.Contains(string(listed), digest) {
		t.Errorf("the pending request does not show the content's digest %s: %s", digest, listed)
	}
	if _, err := ap.Decide(id, true, false); err != nil {
		t.Fatal(err)
	}
	plant(t, f.root, "build.sh", "echo evil; touch pwned")
	txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+id+`"}`)
	if _, err := os.Stat(filepath.Join(f.root, "pwned")); err == nil || strings.Contains(txt, "evil") {
		t.Fatalf("the rewritten build.sh ran: %s", txt)
	}
	if !isErr || !strings.Contains(txt, "changed since it was approved") || !strings.Contains(txt, digest) {
		t.Errorf("refusal: %s", txt)
	}
	// Unchanged between approval and run: the approved content runs.
	if err := os.WriteFile(filepath.Join(f.root, "build.sh"), []byte(approved), 0o755); err != nil {
		t.Fatal(err)
	}
	id = ask()
	ap.Decide(id, true, false)
	if txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+id+`"}`); isErr || !strings.Contains(txt, `"stdout":"approved x\n"`) {
		t.Errorf("approved run: %s", txt)
	}
	// A script whose interpreter is in the workspace is refused: the
	// kernel would start that file by its name.
	plant(t, f.root, "interp", "exec /bin/sh \"$@\"")
	if err := os.WriteFile(filepath.Join(f.root, "indirect.sh"), []byte("#!"+f.root+"/interp\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if txt, isErr, _ := f.call(t, "system.run", `{"argv":["./indirect.sh"]}`); !isErr || !strings.Contains(txt, "interpreter") {
		t.Errorf("an interpreter in the workspace: %s", txt)
	}
}

// TestSystemRunAlwaysNotForWorkspace: "always" on a program in the
// workspace is taken as once: the policy file is not changed, the decision
// says why, and the next call waits again.
func TestSystemRunAlwaysNotForWorkspace(t *testing.T) {
	policy := policyFile(t, `{"allowlist":{"commands":["echo"]}}`)
	var ap *Approvals
	f := setup(t, func(o *Options) {
		var err error
		if ap, err = LoadApprovals(policy, ModeAllowlist, AskOnMiss, o.Workspace.Root(), time.Minute); err != nil {
			t.Fatal(err)
		}
		o.Approvals = ap
	})
	plant(t, f.root, "build.sh", "echo built")
	txt, _, _ := f.call(t, "system.run", `{"argv":["./build.sh"]}`)
	decided, err := ap.Decide(pendingID(txt), true, true)
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := json.Marshal(decided); !strings.Contains(string(out), "approved once") {
		t.Errorf("the decision does not say it was taken as once: %s", out)
	}
	if saved, _ := os.ReadFile(policy); strings.Contains(string(saved), f.root) {
		t.Errorf("a workspace program was persisted:\n%s", saved)
	}
	if txt, isErr, _ := f.call(t, "system.run", `{"requestId":"`+pendingID(txt)+`"}`); isErr || !strings.Contains(txt, `"stdout":"built\n"`) {
		t.Errorf("the once approval: %s", txt)
	}
	if txt, _, _ := f.call(t, "system.run", `{"argv":["./build.sh"]}`); pendingID(txt) == "" {
		t.Errorf("the next call did not wait: %s", txt)
	}
	// A program outside the workspace that a user other than root may
	// change is not persisted either.
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	outside := plant(t, dir, "tool", "echo outside")
	txt, _, _ = f.call(t, "system.run", `{"argv":["`+outside+`"]}`)
	if decided, err = ap.Decide(pendingID(txt), true, true); err != nil || decided.Always {
		t.Errorf("a program in a world-writable directory: %+v %v", decided, err)
	}
	if saved, _ := os.ReadFile(policy); strings.Contains(string(saved), outside) {
		t.Errorf("a program others can write was persisted:\n%s", saved)
	}
}

// TestSystemRunLogsExecutable: the daemon log and the Ran hook (the audit
// log's system.run.exec line) name the absolute file that ran (in mode
// full, a workspace program needs no approval and runs by its path).
func TestSystemRunLogsExecutable(t *testing.T) {
	var logs syncBuf
	var ran []Ran
	f := setup(t, func(o *Options) {
		o.Approvals, _ = LoadApprovals("", ModeFull, AskOff, o.Workspace.Root(), 0)
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		o.Ran = func(_ registry.Call, r Ran) { ran = append(ran, r) }
	})
	echo, _ := sandbox.LookPath("echo", nil)
	echo, _ = filepath.EvalSymlinks(echo)
	if txt, isErr, _ := f.call(t, "system.run", `{"argv":["echo","a b"]}`); isErr {
		t.Fatal(txt)
	}
	if !strings.Contains(logs.String(), "executable="+echo) {
		t.Errorf("the log does not name %s:\n%s", echo, logs.String())
	}
	plant(t, f.root, "build.sh", "echo built")
	if txt, isErr, _ := f.call(t, "system.run", `{"argv":["./build.sh"]}`); isErr || !strings.Contains(txt, "built") {
		t.Fatal(txt)
	}
	if len(ran) != 2 || ran[0].Command() != echo+" 'a b'" || ran[0].Outcome != "exit 0" || ran[1].Command() != f.root+"/build.sh" {
		t.Errorf("ran: %+v", ran)
	}
}

// syncBuf is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

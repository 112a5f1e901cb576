package workspace

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// TestShowsNetworkFailure: the messages the common tools print when no
// network is there count; a failure that names no network, and a refusal
// by a local port, do not.
func TestShowsNetworkFailure(t *testing.T) {
	for _, tc := range []struct {
		out  string
		want bool
	}{
		{"fatal: unable to access 'https://github.com/x/y.git/': Could not resolve host: github.com", true},
		{"curl: (6) Could not resolve host: example.com", true},
		{"getaddrinfo EAI_AGAIN registry.npmjs.org", true},
		{"npm error code ENOTFOUND\nnpm error syscall getaddrinfo\nnpm error errno ENOTFOUND", true},
		{"ssh: Could not resolve hostname github.com: Temporary failure in name resolution", true},
		{"bash: connect: Network is unreachable\nbash: line 1: /dev/tcp/10.255.255.1/80: Network is unreachable", true},
		{"bash: connect: Permission denied\nbash: line 1: /dev/tcp/93.184.215.14/443: Permission denied", true},
		{"Error: connect EACCES 93.184.215.14:443", true},
		{"wget: unable to resolve host address 'example.com'", true},
		{"Get \"https://proxy.golang.org/x/@v/list\": dial tcp: lookup proxy.golang.org on 127.0.0.53:53: server misbehaving", true},
		{"pip: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution", true},
		{"curl: (7) Failed to connect to 93.184.215.14 port 443: Connection refused", true},
		{"bash: line 1: /dev/tcp/127.0.0.1/1: Connection refused", false},
		{"Error: connect ECONNREFUSED 127.0.0.1:5432", false},
		{"bash: connect: Connection refused", false}, // no address: may well be local
		{"ls: cannot access '/no/such/dir': No such file or directory", false},
		{"npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/nope", false},
		{`[vite] Internal server error: Failed to resolve import "./missing" from "src/main.ts"`, false}, // a module, not a host
		{"", false},
	} {
		if got := showsNetworkFailure(tc.out); got != tc.want {
			t.Errorf("showsNetworkFailure(%q) = %v, want %v", tc.out, got, tc.want)
		}
	}
}

// TestExecNetworkNote: with ExecEnv.NoNetwork set, exec's result for a
// command that failed reaching the network ends with that line, in the
// text result and in the structured one (stderr: separate); a success, a
// failure unrelated to the network, and an executor whose commands have the
// network (NoNetwork empty) get nothing added. The commands run under bwrap
// with the network cut, as the daemon runs them without a token.
func TestExecNetworkNote(t *testing.T) {
	testenv.Bwrap(t)
	ws, err := fsops.NewDir(t.TempDir(), fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeBwrap, WorkspaceRoot: ws.Root(), NoNetwork: true,
		Policy: sandbox.PolicyConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	const note = "[agentbe] no network here: --exec-network=true"
	call := func(noNetwork string, args map[string]any) (string, bool) {
		reg := registry.New(registry.Options{})
		if err := reg.Set("workspace", Tools(ws, ExecEnv{Executor: ex, NoNetwork: noNetwork})); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(args)
		res, err := reg.Call(context.Background(), "exec", registry.Call{Args: raw, Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return res.Content[0].(*mcp.TextContent).Text, res.IsError
	}
	unreachable := "exec 3<>/dev/tcp/10.255.255.1/80"
	text, isErr := call(note, map[string]any{"command": unreachable})
	if !isErr || !strings.HasSuffix(text, "\n"+note) || !strings.Contains(text, "Network is unreachable") {
		t.Errorf("no network, unreachable: error %v, text %q; want the command's error and the note as its last line", isErr, text)
	}
	text, _ = call(note, map[string]any{"command": unreachable, "stderr": "separate"})
	var structured struct {
		ExitCode int    `json:"exitCode"`
		Note     string `json:"note"`
	}
	if err := json.Unmarshal([]byte(text), &structured); err != nil || structured.ExitCode == 0 || structured.Note != note {
		t.Errorf("structured result %q (%v); want exitCode ≠ 0 and note %q", text, err, note)
	}
	for _, args := range []map[string]any{
		{"command": "ls /no/such/dir"},
		{"command": "echo 'Could not resolve host: github.com'"},
		{"command": "exec 3<>/dev/tcp/127.0.0.1/1"},
		{"command": "ls /no/such/dir", "stderr": "merged"},
	} {
		if text, _ := call(note, args); strings.Contains(text, note) {
			t.Errorf("%v: %q carries the network note", args, text)
		}
	}
	if text, _ := call("", map[string]any{"command": unreachable}); strings.Contains(text, "[agentbe]") {
		t.Errorf("an executor with network added a note: %q", text)
	}
}

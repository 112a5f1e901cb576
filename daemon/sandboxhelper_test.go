package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// copyProgram copies the program src to a fresh directory of the test's
// as agentbe-sandbox, with mode perm.
func copyProgram(t *testing.T, src string, perm os.FileMode) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), sandbox.HelperName)
	if err := os.WriteFile(p, b, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSandboxHelper: --sandbox-helper names the trampoline the daemon
// starts: the daemon logs it at start and runs a landlock command through
// it over MCP; a helper others could have changed fails the start naming
// the flag; one of another protocol version (an older install) is passed
// over with a warning naming both versions. (Which program actually ran
// is held by sandbox's TestHelperIsTheTrampoline.)
func TestSandboxHelper(t *testing.T) {
	helper := testbin.SandboxHelper(t)
	t.Run("landlock", func(t *testing.T) {
		if sandbox.LandlockABI() < 1 {
			t.Skip("this kernel has no Landlock")
		}
		c := testConfig(t)
		c.Isolation = "landlock"
		c.SandboxHelper = copyProgram(t, helper, 0o755)
		r := start(t, c, nil)
		logs := r.logs.String()
		if !strings.Contains(logs, "sandbox trampoline: agentbe-sandbox") || !strings.Contains(logs, "path="+c.SandboxHelper) {
			t.Fatalf("the start log does not name the helper:\n%s", logs)
		}
		text, _, isErr := callTool(t, mcpSession(t, r), "exec", map[string]any{"command": "echo through-the-helper"})
		if isErr || !strings.Contains(text, "through-the-helper") {
			t.Fatalf("exec: error %v:\n%s", isErr, text)
		}
	})
	t.Run("group-writable", func(t *testing.T) {
		c := testConfig(t)
		c.SandboxHelper = copyProgram(t, helper, 0o775)
		d, err := New(c, Options{})
		if err == nil {
			d.Close()
			t.Fatal("a group-writable helper was accepted")
		}
		if !strings.Contains(err.Error(), "--sandbox-helper "+c.SandboxHelper) || !strings.Contains(err.Error(), "writable by its group") {
			t.Fatalf("error %v", err)
		}
		// --check-config (Check) refuses it too, before anything starts.
		if errs := Check(c); len(errs) != 1 || !strings.Contains(errs[0].Error(), "--sandbox-helper "+c.SandboxHelper) {
			t.Fatalf("Check: %v", errs)
		}
	})
	t.Run("stale", func(t *testing.T) {
		truePath, err := exec.LookPath("true")
		if err != nil {
			t.Skip("no true program to play an older helper")
		}
		c := testConfig(t)
		c.SandboxHelper = copyProgram(t, truePath, 0o755)
		r := start(t, c, nil)
		logs := r.logs.String()
		for _, want := range []string{"speaks another protocol", "path=" + c.SandboxHelper, "helper_protocol=none", "daemon_protocol=1", "sandbox trampoline: this program"} {
			if !strings.Contains(logs, want) {
				t.Fatalf("the start log lacks %q:\n%s", want, logs)
			}
		}
	})
}

//go:build linux

package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// TestLinksOnlyTheTrampoline holds the point of this program: its start
// is the trampoline's and little else, so everything it links is the
// standard library, golang.org/x/sys and sandbox/sandboxexec. A package
// added here (or to sandboxexec) that pulls in more fails it, naming the
// package.
func TestLinksOnlyTheTrampoline(t *testing.T) {
	goTool := testenv.Command(t, "golang-go", "go")
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/agentbe/agentbe-daemon/cmd/agentbe-sandbox": true,
		"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec": true,
	}
	n := 0
	for _, p := range strings.Fields(string(out)) {
		n++
		if !allowed[p] && !strings.HasPrefix(p, "golang.org/x/sys/") {
			t.Errorf("agentbe-sandbox links %s: only the standard library, golang.org/x/sys and sandbox/sandboxexec belong in the trampoline", p)
		}
	}
	if n < 2 {
		t.Fatalf("go list named %d packages outside the standard library:\n%s", n, out)
	}
}

// TestAnswersTheProtocol: the built program answers the daemon's
// protocol question with this source's version, and refuses to run by hand.
func TestAnswersTheProtocol(t *testing.T) {
	goTool := testenv.Command(t, "golang-go", "go")
	bin := filepath.Join(t.TempDir(), "agentbe-sandbox")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, sandboxexec.Arg, sandboxexec.ProtocolArg).Output()
	if err != nil || strings.TrimSpace(string(out)) != sandboxexec.ProtocolLine() {
		t.Fatalf("%s %s: %q, %v", sandboxexec.Arg, sandboxexec.ProtocolArg, out, err)
	}
	msg, err := exec.Command(bin).CombinedOutput()
	if e, ok := err.(*exec.ExitError); !ok || e.ExitCode() != 2 || !strings.Contains(string(msg), "not meant to be run by hand") {
		t.Fatalf("run by hand: %v\n%s", err, msg)
	}
}

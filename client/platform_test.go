package client

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBuildsOffLinux: off Linux the client library is its Remote and
// Memory kinds (Local is NOT_IMPLEMENTED there: local_other.go), which
// need of the daemon only the file door's path rules and memory tree, the
// portable command policy and the /ssh client: not the executor, its
// landlock trampoline, the tools or the faces, which are Linux only. It
// builds for macOS; for Windows its dependencies are checked (fsops's
// directory workspace uses Unix calls, so the build stops there).
func TestBuildsOffLinux(t *testing.T) {
	const self = "github.com/agentbe/agentbe-daemon/"
	// client/mcpbridge is agentbe-bridge's stdio-to-HTTP half: standard
	// library and internal/opfile only, so it is listed by ./... here and
	// builds everywhere.
	// internal/tick (the keepalive timer internal/wsnet uses) is standard
	// library only too, and so is internal/opfile (the token file read as
	// a regular file, without blocking, bounded), with the path walker it
	// judges a file's way by (internal/resolvepath) and the mount table's
	// parser that one uses (internal/mountinfo).
	allowed := []string{"client", "client/mcpbridge", "errcode", "fsops", "sandbox/policy", "ssh/wsclient", "internal/wsnet", "internal/tick", "internal/jsonstr", "internal/clip", "internal/opfile",
		"internal/resolvepath", "internal/mountinfo"}
	for _, goos := range []string{"darwin", "windows"} {
		t.Run(goos, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./...")
			cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("GOOS=%s go list -deps: %v\n%s", goos, err, out)
			}
			deps := strings.Fields(string(out))
			if !slices.Contains(deps, self+"sandbox/policy") || !slices.Contains(deps, "net/http") {
				t.Fatalf("GOOS=%s: the client's dependencies lack the policy or net/http:\n%s", goos, out)
			}
			for _, p := range deps {
				if rel, ok := strings.CutPrefix(p, self); ok && !slices.Contains(allowed, rel) {
					t.Errorf("GOOS=%s: the client depends on %s; off Linux it may use only %v", goos, p, allowed)
				}
			}
		})
	}
	cmd := exec.Command("go", "build", "./...")
	cmd.Env = append(os.Environ(), "GOOS=darwin", "GOARCH=amd64")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=darwin go build ./client/...: %v\n%s", err, out)
	}
}

package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// This directory is its own module (go.mod here), so that the test-only
// dependencies above (BuildKit, kustomize, the Kubernetes API types) stay out
// of the daemon's go.mod and out of every program that imports one of its
// packages. A module cannot import another's internal/ packages, so the
// daemon's binary is built here the way internal/testbin builds it for the
// root module's tests: as the release is (static, trimmed), once per test
// process, or taken from AGENT_BACKEND_BIN.

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

// daemonBin returns the agent-backend binary, building ../cmd/agent-backend
// (the repository root is this module's parent directory) on first use.
func daemonBin(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(buildDaemon)
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binPath
}

func buildDaemon() {
	if p := os.Getenv("AGENT_BACKEND_BIN"); p != "" {
		binPath, binErr = filepath.Abs(p)
		return
	}
	if binDir, binErr = os.MkdirTemp("", "agentbe-testbin-"); binErr != nil {
		return
	}
	binPath = filepath.Join(binDir, "agent-backend")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=0.0.0-test",
		"-o", binPath, "./cmd/agent-backend")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		binErr = fmt.Errorf("go build ./cmd/agent-backend: %v\n%s", err, out)
	}
}

// cleanupDaemonBin removes what daemonBin built; TestMain calls it.
func cleanupDaemonBin() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

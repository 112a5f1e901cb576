// Package testbin builds the agent-backend binary once per test process, for
// the tests that run it the way users, systemd, Kubernetes and the client
// libraries do. It is built as the release is (static, trimmed), so the flags
// and behaviour under test are those of the binary people install.
package testbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	err  error
	dir  string
)

// Path returns the binary, building ./cmd/agent-backend on first use. The
// environment variable AGENT_BACKEND_BIN names an already built binary to use
// instead. A build failure fails tb.
func Path(tb testing.TB) string {
	tb.Helper()
	p, err := Build()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Build is Path for TestMain, where there is no testing.TB yet.
func Build() (string, error) {
	once.Do(build)
	return path, err
}

// Cleanup removes what Path and SandboxHelper built; call it from
// TestMain after m.Run.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
	if helper.dir != "" {
		os.RemoveAll(helper.dir)
	}
}

var helper struct {
	once      sync.Once
	dir, path string
	err       error
}

// SandboxHelper returns the agentbe-sandbox trampoline (./cmd/agentbe-sandbox),
// built as the release is on first use, alone in a directory of its own
// (0700, the test's user's), so that a test may hand that path to
// sandbox.OpenHelper or copy it. The environment variable
// AGENTBE_SANDBOX_BIN names an already built one to use instead (a
// benchmark run as another user). A build failure fails tb.
func SandboxHelper(tb testing.TB) string {
	tb.Helper()
	helper.once.Do(func() {
		if p := os.Getenv("AGENTBE_SANDBOX_BIN"); p != "" {
			helper.path, helper.err = filepath.Abs(p)
			return
		}
		root, err := moduleRoot()
		if err != nil {
			helper.err = err
			return
		}
		if helper.dir, helper.err = os.MkdirTemp("", "agentbe-testhelper-"); helper.err != nil {
			return
		}
		helper.path = filepath.Join(helper.dir, "agentbe-sandbox")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", helper.path, "./cmd/agentbe-sandbox")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			helper.err = fmt.Errorf("go build ./cmd/agentbe-sandbox: %v\n%s", err, out)
		}
	})
	if helper.err != nil {
		tb.Fatal(helper.err)
	}
	return helper.path
}

func build() {
	if p := os.Getenv("AGENT_BACKEND_BIN"); p != "" {
		path, err = filepath.Abs(p)
		return
	}
	root, e := moduleRoot()
	if e != nil {
		err = e
		return
	}
	if dir, err = os.MkdirTemp("", "agentbe-testbin-"); err != nil {
		return
	}
	path = filepath.Join(dir, "agent-backend")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=0.0.0-test",
		"-o", path, "./cmd/agent-backend")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, e := cmd.CombinedOutput(); e != nil {
		err = fmt.Errorf("go build ./cmd/agent-backend: %v\n%s", e, out)
	}
}

// moduleRoot is the nearest directory above the working directory (a test's
// package directory) that holds go.mod.
func moduleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("testbin: no go.mod above the working directory")
		}
		d = parent
	}
}

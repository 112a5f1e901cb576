// Package testenv decides, in one place, what a test does when the machine
// lacks something it needs (a program such as bwrap or rg, the interop
// suite's npm packages, PostgreSQL, Chromium). On a developer's machine the
// test skips and its message names what is missing and how to get it; under
// CI=true, where .ci/run installs everything, it fails instead, so that CI
// never passes a test it did not run.
//
// A test asks for what it needs first thing:
//
//	rg := testenv.Command(t, "ripgrep", "rg")   // the Debian package, then the program
//	cli := testenv.File(t, "../interop/node_modules/agent-backend/dist/cli.js", "cd interop && npm ci")
//
// Skips for reasons CI cannot change (not root, a kernel without a feature)
// are not this package's: they stay t.Skip with their reason.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// InCI reports that the tests run under CI=true (any non-empty value but
// "false" and "0"), where everything a test needs is installed.
func InCI() bool {
	switch os.Getenv("CI") {
	case "", "0", "false":
		return false
	}
	return true
}

// Missing ends the test for want of what, which says what is missing and
// how to install it ("bwrap is not installed (apt-get install
// bubblewrap)"): a skip on a developer's machine, a failure in CI.
func Missing(tb testing.TB, what string) {
	tb.Helper()
	if InCI() {
		tb.Fatalf("%s; CI=true, so this fails instead of skipping (.ci/run installs it)", what)
		return // Fatalf does not return; a recording TB's does
	}
	tb.Skipf("%s; CI installs it", what)
}

// Command returns the path of the first of names found on PATH, or ends
// the test through Missing, naming the Debian package pkg that provides it.
func Command(tb testing.TB, pkg string, names ...string) string {
	tb.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	what := names[0] + " is not installed"
	if len(names) > 1 {
		what = "none of " + joinNames(names) + " is installed"
	}
	Missing(tb, what+" (apt-get install "+pkg+")")
	return ""
}

// Bwrap returns bubblewrap's path, or ends the test through Missing.
func Bwrap(tb testing.TB) string {
	tb.Helper()
	return Command(tb, "bubblewrap", "bwrap")
}

// File returns path when it exists, or ends the test through Missing,
// naming the command that brings it (install: "cd interop && npm ci").
func File(tb testing.TB, path, install string) string {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(tb, path+" is missing (run: "+install+")")
	}
	return path
}

func joinNames(names []string) string {
	s := ""
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			s += " or "
		default:
			s += ", "
		}
		s += n
	}
	return s
}

// SharedTempDir returns a fresh directory under /tmp (mode 0755, symlinks
// resolved, removed at cleanup) for a test whose files another user must
// reach (a --run-as user, or the nobody Chromium runs as), or whose case is
// a host path under /tmp itself (the sandbox mounts a private /tmp over
// it). t.TempDir and os.MkdirTemp("", …) follow TMPDIR, which can be
// anywhere, and a directory only its owner may search (`mktemp -d` makes
// one 0700, as does a private ~/tmp): the other user then cannot reach
// anything under it. /tmp is searchable by all.
func SharedTempDir(tb testing.TB) string {
	tb.Helper()
	d, err := os.MkdirTemp("/tmp", "agentbe-test-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		tb.Fatal(err)
	}
	if d, err = filepath.EvalSymlinks(d); err != nil {
		tb.Fatal(err)
	}
	return d
}

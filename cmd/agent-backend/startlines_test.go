package main

import (
	"bytes"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/config"
)

// TestWarnRootCommands: one warning with the --run-as hint exactly when
// commands would run as uid 0 (a root daemon, a workspace on disk, no
// --run-as).
func TestWarnRootCommands(t *testing.T) {
	for _, tc := range []struct {
		name    string
		euid    int
		runAs   string
		backend string
		warn    bool
	}{
		{"root", 0, "", "filesystem", true},
		{"root with --run-as", 0, "agent", "filesystem", false},
		{"not root", 1000, "", "filesystem", false},
		{"root, memory backend (no commands)", 0, "", "memory", false},
	} {
		var b bytes.Buffer
		warnRootCommands(slog.New(slog.NewTextHandler(&b, nil)), config.Config{RunAs: tc.runAs, Backend: tc.backend}, tc.euid)
		got := b.String()
		if !tc.warn {
			if got != "" {
				t.Errorf("%s: %q, want nothing", tc.name, got)
			}
			continue
		}
		if strings.Count(got, "\n") != 1 || !strings.Contains(got, "level=WARN") ||
			!strings.Contains(got, "commands will run as root (uid 0)") || !strings.Contains(got, `hint="--run-as <user>: commands`) {
			t.Errorf("%s: %q, want one warning naming uid 0 with the --run-as hint", tc.name, got)
		}
	}
}

// TestRootCommandsWarningAtStart: the binary, run as root, warns once
// without --run-as and not with it.
func TestRootCommandsWarningAtStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the warning is for a root daemon (TestWarnRootCommands covers the rule)")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no user nobody for --run-as:", err)
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o777); err != nil {
		t.Fatal(err)
	}
	p := startDaemon(t, "--root", root)
	if n := strings.Count(p.stderr.String(), "commands will run as root (uid 0)"); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, p.stderr)
	}
	if !strings.Contains(p.stderr.String(), `hint="--run-as <user>: commands`) {
		t.Errorf("no --run-as hint:\n%s", p.stderr)
	}
	p = startDaemon(t, "--root", root, "--run-as", "nobody")
	if strings.Contains(p.stderr.String(), "commands will run as root") {
		t.Errorf("--run-as nobody, yet the warning:\n%s", p.stderr)
	}
}

package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
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
			!strings.Contains(got, "commands will run as root (uid 0)") || !strings.Contains(got, `hint="--run-as <user>: the agent's commands`) {
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
	if !strings.Contains(p.stderr.String(), `hint="--run-as <user>: the agent's commands`) {
		t.Errorf("no --run-as hint:\n%s", p.stderr)
	}
	p = startDaemon(t, "--root", root, "--run-as", "nobody")
	if strings.Contains(p.stderr.String(), "commands will run as root") {
		t.Errorf("--run-as nobody, yet the warning:\n%s", p.stderr)
	}
}

// TestStateFilesLine: the binary lists, in one start-up line, what it
// will write where: the host key under --state-dir (created there), the
// upstream caches with --upstreams, the transactions' directory with
// --transactions, the audit log; an explicit
// --ssh-host-key wins.
func TestStateFilesLine(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	audit := filepath.Join(t.TempDir(), "audit.jsonl")
	ups := filepath.Join(t.TempDir(), "ups.json")
	if err := os.WriteFile(ups, []byte(`{"servers":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// startDaemon passes its own --ssh-host-key; run this one with none.
	port := freePort(t)
	cmd := exec.Command(binary, "daemon", "--root", t.TempDir(), "--port", strconv.Itoa(port), "--isolation", "software",
		"--state-dir", state, "--audit-log", audit, "--upstreams", ups, "--transactions")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var errOut syncbuf.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	want := fmt.Sprintf(`msg="files the daemon writes outside the workspace" state_dir=%s ssh_host_key=%s upstream_cache=%s transactions=%s audit_log=%s`,
		state, filepath.Join(state, "ssh_host_ed25519_key"), filepath.Join(state, "upstreams"), filepath.Join(state, "transactions"), audit)
	waitFor(t, func() bool { return strings.Contains(errOut.String(), "msg=listening") })
	if n := strings.Count(errOut.String(), "files the daemon writes outside the workspace"); n != 1 || !strings.Contains(errOut.String(), want) {
		t.Errorf("%d lines; want one with\n%s\nin:\n%s", n, want, errOut.String())
	}
	if fi, err := os.Stat(filepath.Join(state, "ssh_host_ed25519_key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the host key is not in --state-dir: %v", err)
	}

	key := filepath.Join(t.TempDir(), "key")
	p := startDaemon(t, "--root", t.TempDir(), "--state-dir", state, "--ssh-host-key", key)
	if !strings.Contains(p.stderr.String(), "state_dir="+state+" ssh_host_key=") || strings.Contains(p.stderr.String(), "ssh_host_key="+filepath.Join(state, "ssh_host_ed25519_key")) {
		t.Errorf("an explicit --ssh-host-key does not win:\n%s", p.stderr)
	}
}

// TestWarnRunAsCannotWrite: one warning, naming the user, the root and the
// chown, when the --run-as user cannot write the workspace root; none when
// it can (as anyone, through a group, as the owner) or when no command runs.
func TestWarnRunAsCannotWrite(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody to name in --run-as:", err)
	}
	if nobody.Uid == strconv.Itoa(os.Geteuid()) {
		t.Skip("the test runs as nobody, who then owns every root it makes")
	}
	for _, tc := range []struct {
		name    string
		mode    os.FileMode
		chown   bool // give the root to nobody (needs root)
		backend string
		warn    bool
	}{
		{"another user's 0755 root", 0o755, false, "filesystem", true},
		{"another user's 0775 root, group not nobody's", 0o775, false, "filesystem", true},
		{"writable by anyone", 0o777, false, "filesystem", false},
		{"sticky and writable by anyone", os.ModeSticky | 0o777, false, "filesystem", false},
		{"nobody's own root", 0o755, true, "filesystem", false},
		{"memory backend (no commands)", 0o755, false, "memory", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.Chmod(root, tc.mode); err != nil {
				t.Fatal(err)
			}
			if tc.chown {
				if os.Geteuid() != 0 {
					t.Skip("needs root to give the root to nobody")
				}
				uid, _ := strconv.Atoi(nobody.Uid)
				gid, _ := strconv.Atoi(nobody.Gid)
				if err := os.Chown(root, uid, gid); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.chown && tc.mode&0o020 != 0 {
				// The group case needs a group nobody is not in.
				if gids, _ := nobody.GroupIds(); slices.Contains(gids, strconv.Itoa(os.Getegid())) || nobody.Gid == strconv.Itoa(os.Getegid()) {
					t.Skip("nobody is in this test's group")
				}
			}
			var b bytes.Buffer
			warnRunAsCannotWrite(slog.New(slog.NewTextHandler(&b, nil)), config.Config{Root: root, RunAs: "nobody", Backend: tc.backend})
			got := b.String()
			if !tc.warn {
				if got != "" {
					t.Errorf("%q, want nothing", got)
				}
				return
			}
			for _, want := range []string{"level=WARN", `"commands run as nobody (--run-as) cannot write the workspace root"`, "root=" + root, fmt.Sprintf("mode=%04o", tc.mode.Perm()), `hint="chown nobody ` + root} {
				if !strings.Contains(got, want) {
					t.Errorf("%q, want it to contain %q", got, want)
				}
			}
			if strings.Count(got, "\n") != 1 {
				t.Errorf("%q, want one line", got)
			}
		})
	}
}

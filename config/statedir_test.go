package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestStateDirDefault: /var/lib/agentbe for root, else the user's state
// directory; the host key's default lies in it.
func TestStateDirDefault(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, tt := range []struct {
		euid int
		env  map[string]string
		want string
	}{
		{0, map[string]string{"HOME": "/root", "XDG_STATE_HOME": "/xdg"}, "/var/lib/agentbe"},
		{1000, map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/agentbe"},
		{1000, map[string]string{"HOME": "/home/u", "XDG_STATE_HOME": "/xdg"}, "/xdg/agentbe"},
	} {
		if got := defaultStateDir(tt.euid, env(tt.env)); got != tt.want {
			t.Errorf("defaultStateDir(%d, %v) = %q; want %q", tt.euid, tt.env, got, tt.want)
		}
		if got := defaultHostKey(tt.euid, env(tt.env)); got != filepath.Join(tt.want, "ssh_host_ed25519_key") {
			t.Errorf("defaultHostKey(%d, %v) = %q; not in %s", tt.euid, tt.env, got, tt.want)
		}
	}
}

// TestStateDirMovesItsFiles: --state-dir (or AGENTBE_STATE_DIR, or the
// config key) puts the host key and, with --upstreams, the upstream caches
// under it; their own flags win.
func TestStateDirMovesItsFiles(t *testing.T) {
	state := t.TempDir()
	ups := writeFile(t, "ups.json", `{"servers":[]}`)
	cfgFile := writeFile(t, "c.yaml", "state-dir: "+state+"\n")
	for _, tc := range []struct {
		name         string
		args         []string
		env          map[string]string
		key, cache   string
		wantStateDir string
	}{
		{name: "flag", args: []string{"--state-dir", state}, key: filepath.Join(state, "ssh_host_ed25519_key"), wantStateDir: state},
		{name: "variable", env: map[string]string{"AGENTBE_STATE_DIR": state}, key: filepath.Join(state, "ssh_host_ed25519_key"), wantStateDir: state},
		{name: "config file", args: []string{"--config", cfgFile}, key: filepath.Join(state, "ssh_host_ed25519_key"), wantStateDir: state},
		{name: "with --upstreams", args: []string{"--state-dir", state, "--upstreams", ups},
			key: filepath.Join(state, "ssh_host_ed25519_key"), cache: filepath.Join(state, "upstreams"), wantStateDir: state},
		{name: "--ssh-host-key wins", args: []string{"--state-dir", state, "--ssh-host-key", "/etc/agentbe/key"},
			key: "/etc/agentbe/key", wantStateDir: state},
		{name: "AGENTBE_SSH_HOST_KEY wins", args: []string{"--state-dir", state}, env: map[string]string{"AGENTBE_SSH_HOST_KEY": "/etc/agentbe/key"},
			key: "/etc/agentbe/key", wantStateDir: state},
		{name: "--upstream-cache-dir wins", args: []string{"--state-dir", state, "--upstreams", ups, "--upstream-cache-dir", "/var/cache/ups"},
			key: filepath.Join(state, "ssh_host_ed25519_key"), cache: "/var/cache/ups", wantStateDir: state},
	} {
		c, err := load(t, tc.args, tc.env)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.StateDir != tc.wantStateDir || c.SSHHostKey != tc.key || c.UpstreamCacheDir != tc.cache {
			t.Errorf("%s: state %q, host key %q, cache %q; want %q, %q, %q", tc.name, c.StateDir, c.SSHHostKey, c.UpstreamCacheDir, tc.wantStateDir, tc.key, tc.cache)
		}
		if !strings.Contains(c.Format(), fmt.Sprintf("state-dir: %q", state)) {
			t.Errorf("%s: --check-config's output lacks the state dir:\n%s", tc.name, c.Format())
		}
	}
	if c, err := load(t, nil, map[string]string{"HOME": "/home/u"}); err != nil || c.StateDir != defaultStateDir(os.Geteuid(), os.Getenv) {
		t.Errorf("no flag: state dir %q (%v), want the default", c.StateDir, err)
	}
}

// TestStateDirOutsideWorkspace: a state directory the daemon may write in
// (SSH served) lies outside the workspace; with --local-only (no host key,
// no upstreams) it is not checked, so --root $HOME works there.
func TestStateDirOutsideWorkspace(t *testing.T) {
	root := t.TempDir()
	c := Default()
	c.Root = root
	c.StateDir = filepath.Join(root, ".local", "state", "agentbe")
	c.SSHHostKey = filepath.Join(t.TempDir(), "key")
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--state-dir "+c.StateDir+" lies inside the workspace --root "+root) {
		t.Errorf("state dir inside the workspace: %v", err)
	}
	// Without --transactions, --local-only keeps nothing there.
	c.LocalOnly = true
	if err := c.Validate(); err != nil {
		t.Errorf("--local-only, state dir unused: %v", err)
	}
	// With --transactions their directories are there even without SSH:
	// the rule holds with --local-only.
	c.Transactions = true
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--state-dir "+c.StateDir+" lies inside the workspace") {
		t.Errorf("--local-only --transactions, state dir inside the workspace: %v", err)
	}
	// The memory backend runs no command and keeps nothing there.
	c.Backend = "memory"
	if err := c.Validate(); err != nil {
		t.Errorf("--backend memory --local-only, state dir unused: %v", err)
	}
	c.Backend, c.Transactions = "filesystem", false
	// Checkpoints keep their store there: the rule holds too.
	c.Checkpoints = "manual"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--state-dir "+c.StateDir+" lies inside the workspace") {
		t.Errorf("--checkpoints manual, state dir inside the workspace: %v", err)
	}
	c.StateDir = t.TempDir()
	if err := c.Validate(); err != nil {
		t.Errorf("--checkpoints manual, state dir outside: %v", err)
	}
	if got := fmt.Sprint(c.StateFiles()); got != "[{checkpoints "+filepath.Join(c.StateDir, "checkpoints")+"}]" {
		t.Errorf("state files with --checkpoints: %s", got)
	}
	c.Transactions = true
	if got := fmt.Sprint(c.StateFiles()); got != "[{checkpoints "+filepath.Join(c.StateDir, "checkpoints")+"} {transactions "+filepath.Join(c.StateDir, "transactions")+"}]" {
		t.Errorf("state files with --checkpoints --transactions: %s", got)
	}
}

// TestStateFiles: what the start-up line lists, by what is configured.
func TestStateFiles(t *testing.T) {
	c := Default()
	c.SSHHostKey, c.AuditLog = "/s/key", "/var/log/agentbe.jsonl"
	c.Upstreams, c.UpstreamCacheDir = "/etc/ups.json", "/s/upstreams"
	c.StateDir, c.Transactions = "/s", true
	if got := fmt.Sprint(c.StateFiles()); got != "[{ssh_host_key /s/key} {upstream_cache /s/upstreams} {transactions /s/transactions} {audit_log /var/log/agentbe.jsonl}]" {
		t.Errorf("all: %s", got)
	}
	c.LocalOnly, c.Upstreams, c.AuditLog, c.Backend = true, "", "-", "memory"
	if got := c.StateFiles(); len(got) != 0 {
		t.Errorf("--local-only, memory backend, no upstreams, audit to stderr: %v, want nothing", got)
	}
	c.Backend, c.Transactions = "filesystem", false
	if got := c.StateFiles(); len(got) != 0 {
		t.Errorf("--local-only, no --transactions, no upstreams, audit to stderr: %v, want nothing", got)
	}
}

// TestStateFilesInQuickstart: every name the start-up line can list is in
// docs/quickstart.md's row for that line, so a new user reading the log
// finds each one explained.
func TestStateFilesInQuickstart(t *testing.T) {
	b, err := os.ReadFile("../docs/quickstart.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| `files the daemon writes outside the workspace` |") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/quickstart.md has no row for the line `files the daemon writes outside the workspace`")
	}
	c := Default()
	c.SSHHostKey, c.AuditLog = "/s/key", "/var/log/agentbe.jsonl"
	c.Upstreams, c.UpstreamCacheDir = "/etc/ups.json", "/s/upstreams"
	c.StateDir, c.Transactions, c.Checkpoints = "/s", true, "manual"
	files := c.StateFiles()
	if len(files) != 5 {
		t.Fatalf("StateFiles with everything on = %v, want 5 entries", files)
	}
	for _, f := range files {
		if !strings.Contains(row, "`"+f.What+"=`") {
			t.Errorf("docs/quickstart.md's row for the state files line lacks `%s=`:\n%s", f.What, row)
		}
	}
}

// TestStateDirCheckedForTransactions holds that --state-dir, under which
// transactions keep their directories (and each start clears what dead
// daemons left), is refused when empty, relative, or inside the workspace,
// with --transactions: even with --local-only and nothing else using it.
// Without --transactions (and nothing else using it) it is not checked.
func TestStateDirCheckedForTransactions(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--root", root, "--local-only", "--transactions", "--state-dir", ""}, "must be an absolute path"},
		{[]string{"--root", root, "--local-only", "--transactions", "--state-dir", "state"}, "must be an absolute path"},
		{[]string{"--root", root, "--local-only", "--transactions", "--state-dir", filepath.Join(root, ".state")}, "lies inside the workspace"},
	} {
		c, err := load(t, tc.args, nil)
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), "--state-dir") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v (state dir %q), want a refusal naming --state-dir: %s", tc.args, err, c.StateDir, tc.want)
		}
		off := slices.DeleteFunc(slices.Clone(tc.args), func(a string) bool { return a == "--transactions" })
		if c, err := load(t, off, nil); err != nil {
			t.Errorf("%q: %v", off, err)
		} else if err := c.Validate(); err != nil {
			t.Errorf("%q: %v, want no check of an unused state dir", off, err)
		}
	}
	c, err := load(t, []string{"--root", root, "--local-only", "--transactions", "--state-dir", t.TempDir()}, nil)
	if err == nil {
		err = c.Validate()
	}
	if err != nil {
		t.Errorf("an absolute state dir outside the workspace: %v", err)
	}
}

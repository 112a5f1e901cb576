package daemon

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/ssh/sftpd"
	"github.com/agentbe/agentbe-daemon/tools/browser"
	"github.com/agentbe/agentbe-daemon/tools/previews"
	"github.com/agentbe/agentbe-daemon/tools/watch"
)

// TestCheckDescriptors: the start-up sum of descriptors against a given
// RLIMIT_NOFILE. Under the limit, and with the limit unknown (0), nothing
// is said; over it, the warning gives the limit, the sum, each share with
// what it is for, the sum to raise the limit to, and each flag that lowers
// a share, once. A daemon on stdio only counts no HTTP connections.
func TestCheckDescriptors(t *testing.T) {
	commands := commandsShare("commands", 256)
	sftp := fdShare{"SFTP open files", 16384, "--disable-ssh-ws without --ssh-listen"}
	site := commandsShare("the site's commands", 256)
	need := uint64(fdReserve + 1024 + reserveConns + 256*fdPerCommand + 16384 + 256*fdPerCommand)

	if got, warn := checkDescriptors(65536, 1024, []fdShare{commands, sftp, site}); got != need || warn != "" {
		t.Errorf("at 65536: need %d, warning %q; want %d and none", got, warn, need)
	}
	if got, warn := checkDescriptors(need, 1024, []fdShare{commands, sftp, site}); got != need || warn != "" {
		t.Errorf("at exactly the need: warning %q (need %d)", warn, got)
	}
	if _, warn := checkDescriptors(0, 1024, []fdShare{commands, sftp, site}); warn != "" {
		t.Errorf("an unknown limit warned: %q", warn)
	}
	got, warn := checkDescriptors(4096, 1024, []fdShare{commands, sftp, site})
	if got != need {
		t.Errorf("need %d, want %d", got, need)
	}
	for _, want := range []string{
		"RLIMIT_NOFILE is 4096", "hold " + strconv.FormatUint(need, 10) + " descriptors",
		"16384 for SFTP open files", "1536 for commands", "1536 for the site's commands",
		"1032 for HTTP connections with the reserve slots", "256 for the daemon's own",
		"Raise the limit to at least " + strconv.FormatUint(need, 10),
		"--exec-max-concurrent", "--max-connections", "--disable-ssh-ws without --ssh-listen",
	} {
		if !strings.Contains(warn, want) {
			t.Errorf("the warning lacks %q:\n%s", want, warn)
		}
	}
	if n := strings.Count(warn, "--exec-max-concurrent"); n != 1 {
		t.Errorf("--exec-max-concurrent named %d times, want once (two shares, one flag):\n%s", n, warn)
	}
	if i, j := strings.Index(warn, "16384 for"), strings.Index(warn, "1032 for"); i > j {
		t.Errorf("shares not largest first:\n%s", warn)
	}

	got, warn = checkDescriptors(512, 0, []fdShare{commands})
	if got != fdReserve+256*fdPerCommand || strings.Contains(warn, "HTTP connections") || !strings.Contains(warn, "--exec-max-concurrent") {
		t.Errorf("stdio only: need %d, warning %q", got, warn)
	}
}

// TestEveryPartStatesItsDescriptors: partDescriptors has a row for each
// row of parts (nil where the part holds none of its own) and none other,
// so a new part states what it may hold.
func TestEveryPartStatesItsDescriptors(t *testing.T) {
	names := map[string]bool{}
	for _, p := range parts {
		names[p.name] = true
		if _, ok := partDescriptors[p.name]; !ok {
			t.Errorf("part %q has no row in partDescriptors (daemon/nofile.go)", p.name)
		}
	}
	for name := range partDescriptors {
		if !names[name] {
			t.Errorf("partDescriptors has %q, which is no part", name)
		}
	}
}

// TestDescriptorSharesOfParts: the shares of a daemon running the browser
// (four sessions), previews, the watch tools, a site, SSH and the SSH
// port, as the warning at start counts them, over HTTP and on stdio only
// (no SSH listener runs there), and the warning Serve logs under a limit
// of 4096.
func TestDescriptorSharesOfParts(t *testing.T) {
	var logs bytes.Buffer
	d := &Daemon{log: slog.New(slog.NewTextHandler(&logs, nil))}
	d.w.cfg = config.Config{BrowserMaxSessions: 4, ExecMaxConcurrent: 100, MaxSSHConns: 50}
	for _, name := range []string{"daemon", "workspace", "watch", "browser", "previews", "site", "mcp", "ssh", "ssh-port", "ssh-ws"} {
		d.parts = append(d.parts, started{part: &part{name: name}})
	}
	sum := func(shares []fdShare) (n uint64, whats []string) {
		for _, s := range shares {
			n += s.n
			whats = append(whats, s.what)
		}
		return n, whats
	}
	// The workspace here has no executor (a memory one): no commands.
	want := uint64(watch.DefaultMaxWatchers*fdPerWatcher + 4*browser.DescriptorsPerSession + previews.DefaultMaxConns*fdPerPreviewConn + 100*fdPerCommand)
	if n, whats := sum(d.descriptorShares(false)); n != want {
		t.Errorf("stdio only: %d descriptors in %q, want %d", n, whats, want)
	}
	want += sftpd.DefaultServerHandles + 50*fdPerSSHConn
	if n, whats := sum(d.descriptorShares(true)); n != want {
		t.Errorf("over HTTP: %d descriptors in %q, want %d", n, whats, want)
	}
	d.warnDescriptors(4096, 1024)
	if s := logs.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "--browser-max-sessions") || !strings.Contains(s, "--max-ssh-connections") {
		t.Errorf("the log at a limit of 4096:\n%s", s)
	}
}

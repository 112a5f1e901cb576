package daemon

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/ssh/sftpd"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/tools/browser"
	"github.com/agentbe/agentbe-daemon/tools/previews"
	"github.com/agentbe/agentbe-daemon/tools/watch"
)

// This file: the descriptors the daemon may hold at once under its own
// caps, part by part (partDescriptors, the one place that states what each
// costs), and the start-up check that sums them against RLIMIT_NOFILE
// (checkDescriptors). Past the limit, accept, a command's start and an
// open all fail with EMFILE, whichever comes first; so a daemon whose caps
// add up to more says so at start, with each part's share and the flag
// that lowers it. It lowers nothing itself: each share is a worst case
// that few daemons reach, and the connection cap is already lowered to
// fit fdReserve (connCaps).

// What one unit of each part holds, in descriptors.
const (
	// fdPerCommand: a running command's pipes to the daemon (stdin,
	// stdout, stderr; or a pty), its pidfd, its cgroup's directory, and
	// one more while it starts.
	fdPerCommand = 6
	// fdPerPreviewConn: a connection to a workspace's server and, while it
	// is dialled, the sandbox's network namespace (previews' own count of
	// two, tools/previews).
	fdPerPreviewConn = 2
	// fdPerWatcher: a watcher's inotify instance and its top directory,
	// and the directory its walk has open (fsops.WatchTree).
	fdPerWatcher = 4
	// fdPerSSHConn: a connection of the SSH port (each of /ssh is an HTTP
	// connection, counted with --max-connections).
	fdPerSSHConn = 1
)

// An fdShare is what one part may hold: n descriptors, and the flags
// (or other remedy) that lower it.
type fdShare struct {
	what  string
	n     uint64
	lower string
}

// partDescriptors states, for each row of parts (by name), the descriptors
// it may hold under its caps beyond fdReserve (the log, the listeners, the
// host key, the files tool calls have open) and the HTTP connections
// (--max-connections and the reserve slots, counted by checkDescriptors).
// A nil entry holds none of its own; the comment says why.
// TestEveryPartStatesItsDescriptors keeps every row here. http is false
// for a daemon that serves stdio only (ServeStdio), where no SSH listener
// runs.
var partDescriptors = map[string]func(w *wiring, http bool) fdShare{
	"daemon":    nil, // its routes' answers hold no descriptor
	"admission": nil, // the token files are read and closed
	"workspace": func(w *wiring, _ bool) fdShare {
		if w.exec == nil {
			return fdShare{}
		}
		return commandsShare("commands", w.cfg.ExecMaxConcurrent)
	},
	"checkpoints":   nil, // files opened one at a time, under fdReserve
	"transactions":  nil, // likewise
	"upstreams":     upstreamShare,
	"gateway-tools": nil, // system.run's commands are the workspace's; http.* fetches are tool calls
	"processes":     nil, // its processes are the workspace's commands, under --exec-max-concurrent
	"watch": func(*wiring, bool) fdShare {
		return fdShare{"watchers (watch.DefaultMaxWatchers)", watch.DefaultMaxWatchers * fdPerWatcher, "turn --watch-tools off"}
	},
	"browser": func(w *wiring, _ bool) fdShare {
		n := cmp.Or(w.cfg.BrowserMaxSessions, browser.DefaultMaxSessions)
		return fdShare{"browser sessions' proxies (" + strconv.Itoa(browser.DescriptorsPerSession) + " each)",
			uint64(n) * browser.DescriptorsPerSession, "--browser-max-sessions"}
	},
	"previews": func(*wiring, bool) fdShare {
		return fdShare{"preview connections (previews.DefaultMaxConns)", previews.DefaultMaxConns * fdPerPreviewConn, "turn --previews off"}
	},
	"extensions": nil, // their commands are the workspace's; their fetches are tool calls
	"site": func(w *wiring, _ bool) fdShare {
		// The site has an executor of its own, with the same cap.
		return commandsShare("the site's commands", w.cfg.ExecMaxConcurrent)
	},
	"mcp":     nil, // HTTP connections; stdio is the daemon's own stdin and stdout
	"rest":    nil, // HTTP connections
	"gateway": nil, // WebSockets: HTTP connections
	"ssh": func(_ *wiring, http bool) fdShare {
		if !http {
			return fdShare{}
		}
		// One budget of open SFTP files for /ssh and the SSH port together.
		return fdShare{"SFTP open files (sftpd.DefaultServerHandles)", sftpd.DefaultServerHandles, "--disable-ssh-ws without --ssh-listen"}
	},
	"ssh-port": func(w *wiring, http bool) fdShare {
		if !http {
			return fdShare{}
		}
		n := cmp.Or(w.cfg.MaxSSHConns, sshd.DefaultMaxConns)
		return fdShare{"SSH port connections", uint64(n) * fdPerSSHConn, "--max-ssh-connections"}
	},
	"ssh-ws": nil, // HTTP connections
}

// commandsShare is what n commands at once hold.
func commandsShare(what string, n int) fdShare {
	n = cmp.Or(n, sandbox.DefaultMaxConcurrent)
	return fdShare{what, uint64(n) * fdPerCommand, "--exec-max-concurrent"}
}

// upstreamShare: each --upstreams server is a command that lives as long
// as the daemon, with an executor of its own.
func upstreamShare(w *wiring, _ bool) fdShare {
	if w.upstreams == nil {
		return fdShare{}
	}
	return fdShare{"--upstreams servers", uint64(len(w.upstreams.Health())) * fdPerCommand, "fewer servers in --upstreams"}
}

// descriptorShares are the shares of the parts that run.
func (d *Daemon) descriptorShares(http bool) []fdShare {
	var out []fdShare
	for _, p := range d.parts {
		if f := partDescriptors[p.name]; f != nil {
			if s := f(&d.w, http); s.n > 0 {
				out = append(out, s)
			}
		}
	}
	return out
}

// checkDescriptors sums what the daemon may hold: fdReserve, conns HTTP
// connections with the reserve slots (none for stdio only: conns 0), and
// shares. It returns the sum, and a warning naming each share and what to
// lower or raise when the sum is over nofile (0: unknown, no warning).
func checkDescriptors(nofile uint64, conns int, shares []fdShare) (uint64, string) {
	all := []fdShare{{"the daemon's own (files, the log, listeners)", fdReserve, ""}}
	if conns > 0 {
		all = append(all, fdShare{"HTTP connections with the reserve slots", uint64(conns) + reserveConns, "--max-connections"})
	}
	all = append(all, shares...)
	var need uint64
	for _, s := range all {
		need += s.n
	}
	if nofile == 0 || need <= nofile {
		return need, ""
	}
	slices.SortStableFunc(all, func(a, b fdShare) int { return cmp.Compare(b.n, a.n) })
	var parts, lower []string
	for _, s := range all {
		parts = append(parts, strconv.FormatUint(s.n, 10)+" for "+s.what)
		if s.lower != "" && !slices.Contains(lower, s.lower) {
			lower = append(lower, s.lower)
		}
	}
	return need, fmt.Sprintf("RLIMIT_NOFILE is %d, but the daemon's caps let it hold %d descriptors at once: %s. Past the limit, accepting a connection, starting a command and opening a file fail (EMFILE). Raise the limit to at least %d (systemd LimitNOFILE=, docker --ulimit nofile=, ulimit -Hn), or lower: %s",
		nofile, need, strings.Join(parts, ", "), need, strings.Join(lower, "; "))
}

// warnDescriptors logs, at start, the descriptors the daemon's caps allow
// and warns when nofile cannot hold them; conns are the HTTP connections
// (0 for stdio only).
func (d *Daemon) warnDescriptors(nofile uint64, conns int) {
	need, warn := checkDescriptors(nofile, conns, d.descriptorShares(conns > 0))
	if warn != "" {
		d.log.Warn("the descriptor limit is below what the daemon's caps allow", "rlimit_nofile", nofile, "descriptors", need, "why", warn)
		return
	}
	d.log.Info("descriptors", "rlimit_nofile", nofile, "descriptors", need)
}

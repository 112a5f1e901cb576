package config

import (
	"os"
	"path/filepath"
)

// The files the daemon keeps of its own under --state-dir, when their own
// flags are not given.
const (
	hostKeyName      = "ssh_host_ed25519_key" // --ssh-host-key
	upstreamCacheSub = "upstreams"            // --upstream-cache-dir
	checkpointSub    = "checkpoints"          // --checkpoints
	transactionSub   = "transactions"         // exec's transactions
)

// defaultStateDir is --state-dir's default: /var/lib/agentbe for root, else
// $XDG_STATE_HOME/agentbe or ~/.local/state/agentbe, so a first run as an
// ordinary user needs no write access to /var/lib. The systemd unit runs as
// its own user and names its StateDirectory with --state-dir.
func defaultStateDir(euid int, getenv func(string) string) string {
	if euid == 0 {
		return "/var/lib/agentbe"
	}
	state := getenv("XDG_STATE_HOME")
	if state == "" {
		home := getenv("HOME")
		if home == "" {
			home = os.TempDir()
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "agentbe")
}

// fillStateDefaults puts the files whose flags were not given under
// StateDir: the SSH host key, and each upstream server's package cache
// when --upstreams is set. An explicit flag (or variable, or config key)
// wins.
func (c *Config) fillStateDefaults() {
	if c.StateDir == "" {
		return
	}
	if c.SSHHostKey == "" {
		c.SSHHostKey = filepath.Join(c.StateDir, hostKeyName)
	}
	if c.UpstreamCacheDir == "" && c.Upstreams != "" {
		c.UpstreamCacheDir = filepath.Join(c.StateDir, upstreamCacheSub)
	}
}

// usesStateDir reports whether the daemon may write below --state-dir: it
// runs transactions (--transactions, their directories), serves SSH (a host
// key), runs --upstreams (their caches) or keeps --checkpoints (their
// store). The rule that
// the state directory lies outside the workspace holds then, even where
// --ssh-host-key and --upstream-cache-dir name other places: the
// directory is the operator's either way.
func usesStateDir(c *Config) bool {
	return c.transactionsOn() || c.servesSSH() || c.Upstreams != "" || c.checkpointsOn()
}

// transactionsOn reports whether exec's transactions keep their
// directories under StateDir/transactions (TransactionDir): with
// --transactions, where commands run, which is on a directory workspace
// (--backend filesystem; the daemon refuses --transactions elsewhere).
func (c *Config) transactionsOn() bool {
	return c.Transactions && c.Backend == "filesystem"
}

// TransactionDir is the transactions' directory: StateDir/transactions.
// Each daemon keeps its own below it (named by its pid), and a daemon
// starting removes what daemons no longer running left there.
func (c Config) TransactionDir() string {
	return filepath.Join(c.StateDir, transactionSub)
}

// checkpointsOn reports whether the daemon keeps checkpoints, under
// StateDir/checkpoints (CheckpointDir).
func (c *Config) checkpointsOn() bool {
	return c.Checkpoints != "" && c.Checkpoints != "off"
}

// CheckpointDir is the checkpoint store's directory: StateDir/checkpoints.
func (c Config) CheckpointDir() string {
	return filepath.Join(c.StateDir, checkpointSub)
}

// A StateFile is one file or directory of the daemon's own that it will
// write: what it is (a log key), and where.
type StateFile struct{ What, Path string }

// StateFiles lists what the daemon will write outside the workspace, for
// the start-up line: the SSH host key (when SSH is served), the upstream
// servers' package caches (with --upstreams), the checkpoint store (with
// --checkpoints), the transactions' directory (when commands run) and the
// audit log (when it is a file).
func (c Config) StateFiles() []StateFile {
	var fs []StateFile
	if c.servesSSH() && c.SSHHostKey != "" {
		fs = append(fs, StateFile{"ssh_host_key", c.SSHHostKey})
	}
	if c.Upstreams != "" && c.UpstreamCacheDir != "" {
		fs = append(fs, StateFile{"upstream_cache", c.UpstreamCacheDir})
	}
	if c.checkpointsOn() && c.StateDir != "" {
		fs = append(fs, StateFile{"checkpoints", c.CheckpointDir()})
	}
	if c.transactionsOn() && c.StateDir != "" {
		fs = append(fs, StateFile{"transactions", c.TransactionDir()})
	}
	if c.AuditLog != "" && c.AuditLog != "-" {
		fs = append(fs, StateFile{"audit_log", c.AuditLog})
	}
	return fs
}

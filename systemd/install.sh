#!/usr/bin/env bash
# Install or upgrade agentbe-daemon as a systemd service.
#
#   sudo systemd/install.sh [PATH/TO/agent-backend]
#
# Idempotent: run it again after building a new binary to upgrade. It
#   - installs the binary to /usr/local/bin/agent-backend (when a path is given),
#     and agentbe-sandbox, the sandbox's trampoline, beside it when the given
#     binary has one beside it (make build puts both in bin/),
#   - creates the system user "agentbe" and /srv/agentbe/workspace,
#   - creates /etc/agentbe/token with a random token if there is none (an
#     existing token is never replaced: clients hold it; rotate it as
#     systemd/README.md says),
#   - installs /etc/agentbe/agentbe-daemon.env if there is none (yours is
#     kept),
#   - installs the unit, reloads systemd, enables and starts the service, and
#     restarts it when the binary or the unit changed.
#
# DESTDIR prefixes every file path (not the user or systemctl calls); the
# tests use it with stub commands. Leave it unset on a real machine.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dest=${DESTDIR:-}
user=agentbe
bin=$dest/usr/local/bin/agent-backend
helper=$dest/usr/local/bin/agentbe-sandbox
etc=$dest/etc/agentbe
unit=$dest/etc/systemd/system/agentbe-daemon.service
workspace=$dest/srv/agentbe/workspace

log() { printf 'install.sh: %s\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

if [[ $# -gt 1 ]]; then
	die "usage: $0 [PATH/TO/agent-backend]"
fi
if [[ -z $dest && $(id -u) -ne 0 ]]; then
	die "run as root (it creates a system user and installs a system unit)"
fi

# changed is set when something the running daemon uses was replaced, so an
# upgrade restarts it and a rerun with nothing new leaves it alone.
changed=no

# install_if_different SRC DST MODE: copy SRC to DST unless DST already has
# the same content (then only fix the mode). Returns 0 when it copied, 1 when
# there was nothing to do. It is called as an `if` condition, where set -e
# does not apply, so a failing step must end the script explicitly.
install_if_different() {
	local src=$1 dst=$2 mode=$3
	if [[ -f $dst ]] && cmp -s "$src" "$dst"; then
		chmod "$mode" "$dst" || die "chmod $dst failed"
		return 1
	fi
	install -D -m "$mode" "$src" "$dst" || die "installing $dst failed"
}

# 1. The binary.
if [[ $# -eq 1 ]]; then
	src=$1
	# A bare name would be looked up in PATH when run below, not in the
	# current directory.
	[[ $src == */* ]] || src=./$src
	[[ -f $src && -x $src ]] || die "$1 is not an executable file"
	# Refuse a binary that cannot run here (wrong architecture, truncated
	# download) before it replaces a working one.
	"$src" version >/dev/null || die "$1 version failed: not a usable agent-backend binary"
	if install_if_different "$src" "$bin" 0755; then
		# --version is one line; `version` adds the commit and Go.
		log "installed $bin ($("$bin" --version))"
		changed=yes
	fi
	# The trampoline the daemon starts from its own directory (landlock-mode
	# commands, transactions without in-place mounts). Without one the daemon
	# is its own trampoline, only slower; one left by an older install that
	# speaks another protocol is passed over with a warning at start.
	helper_src=$(dirname "$src")/agentbe-sandbox
	if [[ -f $helper_src && -x $helper_src ]]; then
		if install_if_different "$helper_src" "$helper" 0755; then
			log "installed $helper"
			changed=yes
		fi
	elif [[ -e $helper ]]; then
		log "no agentbe-sandbox beside $1: $helper is kept, and the daemon uses it only if it speaks its protocol"
	fi
elif [[ ! -x $bin ]]; then
	die "no $bin yet: pass the path of a built agent-backend (see docs/deploy.md)"
fi

# 2. The user. A system user with no login shell and no home of its own: its
# state lives in /var/lib/agentbe, which systemd creates (StateDirectory=).
if ! getent passwd "$user" >/dev/null; then
	useradd --system --user-group --home-dir /var/lib/agentbe --no-create-home \
		--shell /usr/sbin/nologin --comment "agentbe-daemon" "$user"
	log "created system user $user"
fi

# 3. The workspace: writable by the daemon only (the unit lets it write
# nowhere else). An existing workspace keeps its contents; only its owner is
# made right, not recursively: files a human put there stay as they are.
# /srv/agentbe is root's, so that only root can put something else under the
# workspace's name; a workspace that is a symlink is refused, because the
# chown to agentbe would follow it and hand its target to the agent's user.
install -d -m 0755 "$dest/srv/agentbe"
chown root:root "$dest/srv/agentbe"
if [[ -L $workspace ]]; then
	die "$workspace is a symlink: make it a directory (to move the workspace, see systemd/README.md)"
fi
if [[ ! -d $workspace ]]; then
	install -d -m 0750 "$workspace"
	log "created $workspace"
fi
chown -h "$user:$user" "$workspace"

# 4. Configuration and the token. /etc/agentbe/token is read by systemd
# (LoadCredential=) as root, so it stays root:root 0600. The token is written
# to a file mktemp creates (O_EXCL, mode 0600): never through a name that
# already exists, which could be a symlink to somewhere else. A token that
# is a symlink is refused: the chown and chmod below would follow it.
install -d -m 0755 "$etc"
chown root:root "$etc"
if [[ -L $etc/token ]]; then
	die "$etc/token is a symlink: replace it with the token file itself (root:root 0600)"
fi
if [[ ! -s $etc/token ]]; then
	new_token=$(mktemp "$etc/.token.XXXXXXXXXX")
	# 32 random bytes as 64 hex characters: safe in a header, a URL
	# query (?token=) and a shell variable without quoting trouble.
	od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$new_token"
	printf '\n' >>"$new_token"
	mv -f "$new_token" "$etc/token"
	log "generated a new token in $etc/token (give it to your clients: sudo cat $etc/token)"
	changed=yes
fi
chown root:root "$etc/token"
chmod 0600 "$etc/token"
if [[ ! -f $etc/agentbe-daemon.env ]]; then
	install -m 0644 "$here/agentbe-daemon.env" "$etc/agentbe-daemon.env"
	log "installed $etc/agentbe-daemon.env (edit it to change the port, bind address, TLS)"
fi

# 5. The unit. It is always ours: local changes belong in a drop-in
# (systemctl edit agentbe-daemon), which an upgrade leaves alone.
if install_if_different "$here/agentbe-daemon.service" "$unit" 0644; then
	log "installed $unit"
	changed=yes
fi
systemctl daemon-reload
systemctl enable --now agentbe-daemon.service
if [[ $changed == yes ]]; then
	# enable --now does not restart a service that was already running:
	# restart it so it runs the new binary, unit or token. Type=notify makes
	# this return only once the daemon is listening (or has failed).
	systemctl restart agentbe-daemon.service
fi

if ! systemctl is-active --quiet agentbe-daemon.service; then
	die "agentbe-daemon did not start; see: journalctl -u agentbe-daemon -n 50"
fi
log "agentbe-daemon is running"

# A quick look at /health, which says which isolation the daemon uses and why.
# Skipped with TLS, whose certificate is for a host name, not 127.0.0.1.
envfile=$etc/agentbe-daemon.env
if grep -Eq '^AGENTBE_TLS_CERT=.+' "$envfile"; then
	log "TLS is on: check https://<your host>:<port>/health from a client"
else
	port=$(sed -n 's/^AGENTBE_PORT=\([0-9][0-9]*\)[[:space:]]*$/\1/p' "$envfile" | tail -n 1)
	# With the token: /health tells its details (isolation) only to a
	# caller the daemon admits; a probe without one gets liveness.
	"$bin" health --url "http://127.0.0.1:${port:-3001}/health" --token-file "$etc/token" ||
		log "warning: /health did not answer ok yet; see: journalctl -u agentbe-daemon"
fi

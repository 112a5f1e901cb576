#!/usr/bin/env bash
# Measure our daemon's SSH port beside OpenSSH's sshd on this machine, both
# driven by the same clients, and print one table (docs/performance.md,
# "Beside OpenSSH sshd").
#
#   bench/sshd/peer.sh [--smoke] [--rev REV] [DRIVER FLAGS]
#
#   --smoke     tiny counts, one round: checks that everything works end to
#               end; judges nothing
#   --rev REV   measure the daemon of commit REV (git archive) instead of the
#               working tree
#   DRIVER FLAGS  passed to the driver (bench/sshd/main.go): -rounds N (5),
#               -execs N (30), -reads N (300), -bulk-mib N (64), -cipher NAME
#               (ssh -c for every client; default: let them negotiate),
#               -workspaces DIR (/dev/shm), -user NAME (agentbe-peer), -keep
#
# Needs root (sshd -D on a port of its own; the login user is made with
# useradd if missing, else its home, shell and password are set with
# usermod: use a user of its own), Go, and OpenSSH's sshd, ssh, sftp and
# ssh-keygen.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
rev=""
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--smoke) args+=(-rounds 1 -execs 3 -reads 20 -bulk-mib 8) ;;
	--rev) rev=$2; shift ;;
	-h|--help) sed -n '2,/^[^#]/s/^#//p' "$0"; exit 0 ;;
	*) args+=("$1") ;;
	esac
	shift
done
for p in sshd ssh sftp ssh-keygen; do
	if ! command -v "$p" >/dev/null && [ ! -x "/usr/sbin/$p" ]; then
		echo "peer.sh: $p not found (install OpenSSH's client and server)" >&2
		exit 2
	fi
done

work=$(mktemp -d "${TMPDIR:-/tmp}/agentbe-peer-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=bench/build.sh
. "$repo/bench/build.sh"
bench_source "$repo" "$rev" "$work"
echo "== building our daemon ($described, as deploy/Dockerfile builds the release) and the driver" >&2
bench_build_daemon "$work/agent-backend-$described"
(cd "$repo" && go build -o "$work/sshd-peer" ./bench/sshd)
"$work/sshd-peer" -bin "$work/agent-backend-$described" "${args[@]}"

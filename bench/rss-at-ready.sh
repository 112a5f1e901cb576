#!/usr/bin/env bash
# rss-at-ready.sh BIN [N] [--all-features] [-- EXTRA DAEMON FLAGS]: start BIN's daemon N times
# (default 5) on a fresh workspace in /dev/shm with bench/compare.sh's flags, and print VmRSS,
# RssAnon and RssFile (KiB) from /proc/PID/status at its first 200 from /health, one start per
# line, then the median VmRSS. --all-features adds every optional feature (bench/features.sh; the
# upstream is BIN's own stdio MCP server). See docs/performance.md, "RSS at ready".
set -euo pipefail
if [[ $# -lt 1 || $1 == --help ]]; then
	sed -n 2,6p "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
bin=$1
shift
n=5
if [[ $# -gt 0 && $1 != -- && $1 != --all-features ]]; then
	n=$1
	shift
fi
all=0
if [[ ${1:-} == --all-features ]]; then
	all=1
	shift
fi
[[ ${1:-} == -- ]] && shift
key=$(mktemp -d)/host_ed25519
trap 'rm -rf "$(dirname "$key")"' EXIT
# shellcheck source=bench/features.sh
. "$(dirname "$0")/features.sh"
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rss=()
for ((i = 0; i < n; i++)); do
	root=$(mktemp -d /dev/shm/agentbe-rss.XXXXXX)
	port=$(freeport)
	features=()
	if [[ $all == 1 ]]; then
		# Outside the workspace: the daemon refuses a state directory inside it.
		extra=$(dirname "$key")/features-$i
		mkdir -p "$extra/upstream-root"
		all_features "$extra" "127.0.0.1:$(freeport)" "$bin" daemon --local-only --root "$extra/upstream-root" --isolation software
	fi
	"$bin" daemon --root "$root" --bind 127.0.0.1 --port "$port" --isolation software \
		--ssh-host-key "$key" --log-level error "${features[@]}" "$@" >/dev/null 2>&1 &
	pid=$!
	for ((j = 0; j < 5000; j++)); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health" || true) == 200 ]] && break
		sleep 0.002
	done
	line=$(awk '/^(VmRSS|RssAnon|RssFile):/ {printf "%s %s KiB  ", $1, $2}' "/proc/$pid/status")
	echo "$line"
	rss+=("$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	rm -rf "$root"
done
printf '%s\n' "${rss[@]}" | sort -n | awk '{a[NR]=$1} END {printf "median VmRSS %.1f MiB over %d starts\n", a[int((NR+1)/2)]/1024, NR}'

#!/usr/bin/env bash
# rss-at-ready.sh BIN [N] [-- EXTRA DAEMON FLAGS]: start BIN's daemon N times (default 5) on a
# fresh workspace in /dev/shm with bench/compare.sh's flags, and print VmRSS, RssAnon and RssFile
# (KiB) from /proc/PID/status at its first 200 from /health, one start per line, then the median
# VmRSS. See docs/performance.md, "RSS at ready".
set -euo pipefail
if [[ $# -lt 1 || $1 == --help ]]; then
	sed -n 2,5p "$0" | sed 's/^# \{0,1\}//'
	exit 2
fi
bin=$1
shift
n=5
if [[ $# -gt 0 && $1 != -- ]]; then
	n=$1
	shift
fi
[[ ${1:-} == -- ]] && shift
key=$(mktemp -d)/host_ed25519
trap 'rm -rf "$(dirname "$key")"' EXIT
rss=()
for ((i = 0; i < n; i++)); do
	root=$(mktemp -d /dev/shm/agentbe-rss.XXXXXX)
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	"$bin" daemon --root "$root" --bind 127.0.0.1 --port "$port" --isolation software \
		--ssh-host-key "$key" --log-level error "$@" >/dev/null 2>&1 &
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

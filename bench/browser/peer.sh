#!/usr/bin/env bash
# Measure our daemon's browser tools beside Playwright MCP on this machine,
# both servers driven over stdio MCP by the same client, on the same page and
# the same Chromium, and print one table (docs/performance.md, "Browser").
#
#   bench/browser/peer.sh [--smoke] [--rev REV] [DRIVER FLAGS]
#
#   --smoke     one round of 3 navigations, no warm-up: checks that
#               everything works end to end; judges nothing
#   --rev REV   measure the daemon of commit REV (git archive) instead of the
#               working tree
#   DRIVER FLAGS  passed to the driver (bench/browser/main.go): -rounds N (5),
#               -runs N (20 navigate + snapshot per server and round),
#               -links N (200), -chromium PATH (/usr/bin/chromium), -keep
#               (the servers' logs), -only ours|playwright and -procs (for
#               profiling: one side, each process's PSS and CPU)
#
# Needs Go, Node (>= 20), npm and Chromium. Playwright MCP is installed from
# bench/package-lock.json (npm ci, only when bench/node_modules does not
# match it); it downloads no browser: both sides run -chromium.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
bench=$(cd "$here/.." && pwd)
repo=$(cd "$here/../.." && pwd)
rev=""
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--smoke) args+=(-smoke -rounds 1 -runs 3) ;;
	--rev) rev=$2; shift ;;
	-h|--help) sed -n '2,/^[^#]/s/^#//p' "$0"; exit 0 ;;
	*) args+=("$1") ;;
	esac
	shift
done
for p in go node npm; do
	if ! command -v "$p" >/dev/null; then
		echo "peer.sh: $p not found" >&2
		exit 2
	fi
done

# Playwright MCP, exactly as pinned (installed only when missing or another version).
"$bench/node-modules.sh"

work=$(mktemp -d "${TMPDIR:-/tmp}/agentbe-browser-peer-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
# shellcheck source=bench/build.sh
. "$repo/bench/build.sh"
bench_source "$repo" "$rev" "$work"
echo "== building our daemon ($described, as deploy/Dockerfile builds the release) and the driver" >&2
bench_build_daemon "$work/agent-backend-$described"
(cd "$repo" && go build -o "$work/browser-peer" ./bench/browser)
"$work/browser-peer" -bin "$work/agent-backend-$described" \
	-pw "$bench/node_modules/@playwright/mcp/cli.js" "${args[@]}"

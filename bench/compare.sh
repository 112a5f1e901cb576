#!/usr/bin/env bash
# Compare our daemon with the reference (agent-backend@0.13.2, pinned in
# bench/package-lock.json) on this machine, and print one table.
#
#   bench/compare.sh [--smoke] [--rounds N] [--out DIR] [--rev REV] [--workspaces DIR]
#
#   --smoke     tiny counts, one round: checks that everything works end to
#               end (CI); asserts nothing about speed and judges no target
#   --rounds N  measured rounds (default 5); each round starts each daemon
#               fresh, ours then the reference, with a new workspace
#   --out DIR   keep the per-round JSON, the daemons' logs and table.md here
#               (default: a temporary directory, removed at the end)
#   --rev REV   measure the daemon of commit REV (git archive, so nothing
#               uncommitted is in it) instead of the working tree
#   --workspaces DIR
#               where each round's workspaces are made (default: /dev/shm
#               when it is a writable tmpfs with 512 MiB free, else $TMPDIR
#               or /tmp). On a
#               disk, creating a small file costs whatever the disk's journal
#               costs at that moment (0.03-0.6 ms on the shared VM of
#               docs/performance.md), which swamps the daemons' own cost in
#               the SFTP small-op figures; pass a disk directory to measure
#               that too
#
# Each round runs ours, the reference, the floors (loadgen floors), and ours
# again with every optional feature on (bench/features.sh; loadgen features:
# RSS at ready, the routed upstream call, a GET through /preview/). The table
# is the vs-reference targets, then the floor targets.
#
# Both daemons listen on 127.0.0.1 only (the reference through
# bench/ref-loopback.cjs, as it has no --bind) with --isolation software.
# Needs Go, Node >= 18 and npm; see docs/performance.md.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
smoke=0
rounds=5
out=""
rev=""
workspaces=""
while [ $# -gt 0 ]; do
	case "$1" in
	--smoke) smoke=1 ;;
	--rounds) rounds=$2; shift ;;
	--out) out=$2; shift ;;
	--rev) rev=$2; shift ;;
	--workspaces) workspaces=$2; shift ;;
	-h|--help) sed -n '2,/^[^#]/s/^#//p' "$0"; exit 0 ;;
	*) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
if [ "$smoke" = 1 ]; then rounds=1; fi
if [ -z "$workspaces" ]; then
	workspaces=${TMPDIR:-/tmp}
	# A container's /dev/shm is often 64 MiB; a full round needs ~200 MiB.
	if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] && [ -w /dev/shm ] &&
		[ "$(($(stat -f -c '%a * %S' /dev/shm)))" -ge $((512 << 20)) ]; then
		workspaces=/dev/shm
	fi
fi
if [ ! -d "$workspaces" ] || [ ! -w "$workspaces" ]; then
	echo "compare.sh: --workspaces $workspaces: not a writable directory" >&2
	exit 2
fi
workspaces_fs=$(stat -f -c %T "$workspaces")

work=$(mktemp -d "${TMPDIR:-/tmp}/agentbe-compare.XXXXXX")
if [ -z "$out" ]; then out="$work/out"; fi
mkdir -p "$out/rounds" "$out/logs" "$work/keys"

cleanup() {
	# loadgen stops its daemon itself (and the kernel kills it with loadgen:
	# PR_SET_PDEATHSIG); this stops a loadgen we are leaving behind.
	local pids
	pids=$(jobs -pr || true)
	# shellcheck disable=SC2086 # one pid per word
	if [ -n "$pids" ]; then kill $pids 2>/dev/null || true; wait 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '== %s\n' "$*" >&2; }

# shellcheck source=bench/build.sh
. "$here/build.sh"
bench_source "$repo" "$rev" "$work"
say "building our daemon ($described, as deploy/Dockerfile builds the release) and the load generator"
bench_build_daemon "$work/agent-backend"
(cd "$src" && go build -o "$work/loadgen" ./bench/loadgen)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u '+%Y-%m-%d %H:%M')

# The reference, exactly as pinned (installed only when missing or another version).
"$here/node-modules.sh"
ref_bin="$here/node_modules/agent-backend/bin/agent-backend.js"
ref_version=$(node -p "require('$here/node_modules/agent-backend/package.json').version")

ours=("$work/agent-backend" daemon --root '{root}' --bind 127.0.0.1 --port '{port}' --isolation software
	--ssh-host-key "$work/keys/ours_ed25519" --log-level warn)
reference=(node --require "$here/ref-loopback.cjs" "$ref_bin" daemon --rootDir '{root}' --port '{port}'
	--isolation software --ssh-host-key "$work/keys/reference_key")
# The idle-connection figure holds 200 WS+SSH connections from 127.0.0.1,
# over the default --max-connections-per-ip (128), which the reference does
# not have: raise it where the daemon has the flag (an older --rev has not).
if "$work/agent-backend" daemon --help 2>&1 | grep -q -- '--max-connections-per-ip'; then
	ours+=(--max-connections-per-ip 1024)
fi

# The features round: ours again, with every optional feature on
# (bench/features.sh), its one upstream the load generator's own minimal
# echo server on stdio. The reference has none of them; an older --rev
# without --previews or --upstreams, or whose load generator has no
# features round, has no such round.
# shellcheck source=bench/features.sh
. "$here/features.sh"
featured=()
if "$work/agent-backend" daemon --help 2>&1 | grep -q -- '--previews' &&
	"$work/agent-backend" daemon --help 2>&1 | grep -q -- '--upstreams' &&
	"$work/loadgen" features -h >/dev/null 2>&1; then
	all_features "$work/features" "127.0.0.1:{sshport}" "$work/loadgen" echo-mcp-stdio
	featured=("${ours[@]}" "${features[@]}")
fi

# loadgen makes each round's workspaces (and the floors') in $TMPDIR.
lg() { TMPDIR="$workspaces" "$work/loadgen" "$@" & wait $!; }

# A measured round that fails is reported and skipped (the table is made of
# the rounds that completed, and the script exits 1); in --smoke, the first
# failure ends the script.
failed=0
round() {
	if lg "$@"; then return 0; fi
	if [ "$smoke" = 1 ]; then exit 1; fi
	failed=$((failed + 1))
	say "round failed: $*"
}

# Round 0 is not counted: it generates each daemon's host key once (as a
# real deployment does) and warms the page cache (node_modules, our binary).
say "warm-up round"
lg run -smoke -name ours -round 0 -out "$work/warm-ours.json" -logs "$out/logs" -- "${ours[@]}"
lg run -smoke -name reference -round 0 -out "$work/warm-ref.json" -logs "$out/logs" -- "${reference[@]}"

mode=()
if [ "$smoke" = 1 ]; then mode=(-smoke); fi
for r in $(seq 1 "$rounds"); do
	say "round $r/$rounds: ours"
	round run "${mode[@]}" -name ours -round "$r" -out "$out/rounds/ours-$r.json" -logs "$out/logs" -- "${ours[@]}"
	say "round $r/$rounds: reference $ref_version"
	round run "${mode[@]}" -name reference -round "$r" -out "$out/rounds/reference-$r.json" -logs "$out/logs" -- "${reference[@]}"
	say "round $r/$rounds: floors"
	round floors "${mode[@]}" -round "$r" -out "$out/rounds/floors-$r.json"
	if [ ${#featured[@]} -gt 0 ]; then
		say "round $r/$rounds: ours with every optional feature on"
		round features "${mode[@]}" -round "$r" -out "$out/rounds/features-$r.json" -logs "$out/logs" -- "${featured[@]}"
	fi
done

{
	echo "agentbe-daemon $described vs agent-backend@$ref_version, $started–$(date -u '+%H:%M') UTC"
	echo "$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), Linux $(uname -r), $(go version | cut -d' ' -f3), Node $(node --version); workspaces in $workspaces ($workspaces_fs); load average at the start $load_start, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	lg report "${mode[@]}" "$out"/rounds/*.json
} | tee "$out/table.md"
if [ "$failed" -gt 0 ]; then
	say "$failed round(s) failed; the table uses the others"
	exit 1
fi

# Sourced by bench/compare.sh, bench/sshd/peer.sh and bench/browser/peer.sh:
# which source tree of the daemon they measure, and its release build.
# shellcheck shell=bash

# bench_source REPO REV WORK sets src, the tree to build (REPO's working
# tree, or commit REV extracted by git archive under WORK), and described,
# its name in the tables.
# shellcheck disable=SC2034 # src and described are for the script that sources this
bench_source() {
	src=$1
	described=$(cd "$1" && git describe --always --dirty 2>/dev/null || echo 'working tree')
	if [ -n "$2" ]; then
		src="$3/src"
		mkdir -p "$src"
		(cd "$1" && git archive "$2") | tar -x -C "$src"
		described=$(cd "$1" && git rev-parse --short "$2")
	fi
}

# bench_build_daemon OUT builds $src's agent-backend into OUT the way
# deploy/Dockerfile builds the release.
bench_build_daemon() {
	(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=bench" -o "$1" ./cmd/agent-backend)
}

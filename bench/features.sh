# shellcheck shell=bash
# Sourced by bench/compare.sh and bench/rss-at-ready.sh (--all-features):
# the flags that turn on every optional feature of the daemon (each row of
# daemon/parts.go that has a flag), so that the figure "RSS at ready, every
# optional feature on" and the rows that need a feature (the routed
# upstream call, /preview/) have one definition.
#
#   all_features DIR SSH_LISTEN UPSTREAM_COMMAND [ARGS...]
#
# writes the files the features need under DIR (an upstreams file whose one
# server, "echo", is UPSTREAM_COMMAND ARGS; an empty extensions directory; a
# tool site of one README.md; an empty authorized_keys for the SSH port at
# SSH_LISTEN) and sets the array `features` to the daemon flags.

all_features() {
	local dir=$1 ssh_listen=$2
	shift 2
	mkdir -p "$dir/state" "$dir/upstream-cache" "$dir/extensions" "$dir/site"
	printf '# A tool site\n\nOne page, so that --site has its front page.\n' >"$dir/site/README.md"
	: >"$dir/authorized_keys"
	local args="" a
	for a in "${@:2}"; do args+="${args:+,}$(json_string "$a")"; done
	printf '{"servers":[{"name":"echo","command":%s,"args":[%s]}]}\n' "$(json_string "$1")" "$args" >"$dir/upstreams.json"
	# shellcheck disable=SC2034 # the caller's: compare.sh starts the daemon with it
	features=(--upstreams "$dir/upstreams.json" --upstream-cache-dir "$dir/upstream-cache"
		--state-dir "$dir/state" --checkpoints manual --transactions
		--gateway-tools --process-tools --watch-tools --browser-tools --previews
		--extensions "$dir/extensions" --site "$dir/site"
		--ssh-listen "$ssh_listen" --ssh-authorized-keys "$dir/authorized_keys")
}

# json_string S: S as a JSON string (paths and plain words: quotes and
# backslashes escaped).
json_string() {
	local s=${1//\\/\\\\}
	printf '"%s"' "${s//\"/\\\"}"
}

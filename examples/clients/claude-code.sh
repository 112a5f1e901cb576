#!/bin/sh
# Adds the daemon to Claude Code (user scope) over streamable HTTP, with the
# static bearer token read from the file the daemon was given.
#   agent-backend daemon --root ./workspace --auth-token-file ~/.agentbe-token
set -eu
token_file=${AGENTBE_TOKEN_FILE:-"$HOME/.agentbe-token"}
url=${AGENTBE_URL:-http://127.0.0.1:3001/mcp}
claude mcp add --scope user --transport http agentbe "$url" \
  --header "Authorization: Bearer $(cat "$token_file")"

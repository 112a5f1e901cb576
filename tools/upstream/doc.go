// Package upstream is the tool provider for configured MCP servers (the
// execution service of docs/upstreams.md): it reads their configuration,
// checks every path argument of a call against the workspace before an
// upstream sees it, and (in the files that build on these) runs each server
// through the sandbox, lists its tools as server__tool and routes calls.
//
// Start here: config.go (the --upstreams file: its shape, defaults, ${VAR}
// expansion and the errors that name the file, the server and the key) and
// paths.go (which arguments are paths, and the containment check through
// fsops).
package upstream

// Package client is the Agent Backend client contract as a Go library: one
// Backend interface for a workspace on this machine (Local, on the daemon's own
// fsops and sandbox doors), in memory (Memory) or on a remote daemon (Remote,
// SSH over WebSocket for files and exec, streamable HTTP for MCP), plus scopes,
// a pool and an operations log. It implements the "Client Libraries" half of
// the Agent Backend specification; docs/client.md is the guide.
//
// It builds off Linux too: there Remote and Memory work and NewLocal is
// NOT_IMPLEMENTED, since the sandbox is Linux only. What needs the sandbox
// is in local_linux.go and mcp_local.go (the local executor, the spawned
// and in-process MCP servers); the remote backend judges commands with the
// portable policy (sandbox/policy).
//
// Start here: backend.go declares Backend and its option types. Every kind is a
// driver (driver.go: the operations on one root directory) wrapped by base
// (base.go), which owns everything the kinds share so that it is written once:
// the status and its subscribers, closeable tracking and Destroy
// (lifecycle.go), scopes and their path and environment rules, and the
// operations log (oplog.go). A new kind is a new driver; it never re-implements
// a rule of base.
//
// Errors are *errcode.Error (aliased here as Error) with the specification's
// codes; test them with errors.As, errcode.Is or errors.Is on the wrapped
// cause (fs.ErrNotExist, ErrDestroyed, *ExitError).
package client

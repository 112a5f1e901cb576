// Package sshws serves SSH over WebSocket: the /ssh endpoint of the daemon,
// the channel RemoteFilesystemBackend (agent-backend 0.11/0.13, TypeScript and
// Python) uses for every file operation and command, and what
// `agent-backend proxy` bridges OpenSSH's ssh, sftp and rsync to.
//
// A connection goes through three layers:
//
//   - WebSocket (gorilla/websocket): ServeHTTP upgrades, checks the token
//     ("Authorization: Bearer" or "?token="; a bad one completes the upgrade
//     and closes with 4001 "Unauthorized"), enforces the connection cap, and
//     wraps the socket in a net.Conn whose byte stream is the concatenation
//     of the messages (internal/wsnet). The server pings idle peers and drops one
//     that stays silent for three keepalive intervals.
//   - SSH (x/crypto/ssh): each WebSocket gets its own SSH server connection,
//     with the host key and configuration made once per Server. Any SSH
//     authentication is accepted: the WebSocket token is the gate. ServeHTTP
//     returns once the client has logged in; the connection then runs on
//     one goroutine of ours (channel opens and global requests) plus
//     x/crypto's three (transport reads, key exchange, multiplexer).
//   - Sessions: exec and shell (with or without a pty) run through
//     sandbox.Executor, the same door, isolation and safety policy as MCP
//     exec (the reference daemon runs SSH commands unsandboxed; we don't);
//     the sftp subsystem is our own SFTP v3 server (sftpserver.go, codec
//     in sftpwire.go) over fsops.Workspace, which answers each request
//     inline on the channel's goroutine, byte-for-byte as pkg/sftp's
//     request server does.
//
// This package never opens a workspace file or starts a process itself;
// fsops and sandbox do, and they confine both. The one file it touches is the
// daemon's own SSH host key.
//
// What one connection can hold is bounded (limits.go): session channels,
// SFTP handles across its sessions, and SFTP requests in the file system at
// once, per connection and per server. A request stuck in the kernel (a hung
// file system) is abandoned when its channel closes, so it never holds up a
// connection's end or Shutdown.
//
// When a connection ends, for whatever reason (the client closed it, went
// silent, or the server is shutting down), the processes it started are
// killed: the reference leaves them to die of broken pipes, which a command
// that never writes survives.
package sshws

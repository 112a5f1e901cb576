// Package sshws serves SSH over WebSocket: the /ssh endpoint of the daemon,
// the channel RemoteFilesystemBackend (agent-backend 0.11/0.13, TypeScript and
// Python) uses for every file operation and command, and what
// `agent-backend proxy` (package wsclient) bridges OpenSSH's ssh, sftp and
// rsync to.
//
// It is the WebSocket adapter in front of the SSH core (package sshd):
//
//   - ServeHTTP applies the Origin and Host rules (internal/httpguard),
//     upgrades, and checks the token ("Authorization: Bearer" or
//     "?token="; a bad one completes the upgrade and closes with 4001
//     "Unauthorized"). The socket becomes a net.Conn whose byte stream is
//     the concatenation of the messages (internal/wsnet). The server pings
//     idle peers and drops one that stays silent for three keepalive
//     intervals (1011).
//   - The core does the rest (sshd.Server.Handshake), as the daemon's one
//     SSH configuration (sshd.Config, shared with the SSH port) says: the
//     connection cap, the login timeout, SSH itself, sessions through
//     sandbox.Executor, the sftp subsystem (package sftpd) and legacy scp,
//     the limits. What /ssh adds is its transport: SSH authentication
//     accepts everything (the token is the gate), and keepalive is the
//     WebSocket's pings. The core's refusals are typed errors, which
//     wsConn.CloseCause turns into close codes: 1013 over the cap, 1001
//     shutting down, 1008 login timeout.
//   - ServeHTTP returns once the client has logged in; the connection then
//     runs on one goroutine of ours (sshd.Conn.Serve) plus x/crypto's three
//     (transport reads, key exchange, multiplexer).
//
// When a connection ends, for whatever reason (the client closed it, went
// silent, or the server is shutting down), the processes it started are
// killed: the reference leaves them to die of broken pipes, which a command
// that never writes survives.
package sshws

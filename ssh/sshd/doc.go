// Package sshd is the daemon's SSH server core, on any net.Conn: the
// WebSocket endpoint (sshws) hands it each upgraded WebSocket, and anything
// else (a TCP listener, a test's loopback connection) uses it directly.
//
// Entry points:
//
//   - Serve(net.Listener) accepts and serves each connection on a
//     goroutine of its own.
//   - HandleConn(ctx, net.Conn) serves one connection on the calling
//     goroutine until it ends.
//   - Handshake(ctx, net.Conn) registers the connection (the cap), runs the
//     handshake and authentication (the login timeout) and returns a Conn
//     whose Serve the caller runs, usually on a new goroutine, so that the
//     caller's own (an HTTP handler's, with its stack and buffers) is free
//     once the client has logged in. A served connection runs on one
//     goroutine of ours (channel opens and global requests) plus x/crypto's
//     three.
//
// One Config (config.go) holds what every listener of the daemon serves:
// the workspace and executor, the host key (LoadOrCreateHostKey, the one
// file this package reads), the caps (connections per listener; channels
// per connection, and across every connection of every listener in one
// ChannelPool, with a per-address share of it; SFTP's handles and
// file-system slots, the server-wide ones shared), the login timeout, the
// env allowlist, the subsystems by name ("sftp", package sftpd) and the
// commands served in place of the executor (legacy scp, package scpd), and
// the hooks (Forward, SessionEnded). NewConfig makes it ready once, and
// Config.Server builds each listener's Server from it with a Transport:
// authentication (NoClientAuth, password and public-key callbacks: with
// none set, every login is refused) and SSH keepalives
// (keepalive@openssh.com every KeepaliveInterval, off when 0), the only
// things in which the SSH port and /ssh differ. Refusals are typed errors
// (ErrTooManyConns, ErrShuttingDown, ErrLoginTimeout); a net.Conn that
// implements CloseCauser is told which when the server closes it, which is
// how sshws sends its WebSocket close codes.
//
// Sessions (session.go): exec and shell (with or without a pty), env,
// signal and window-change, through sandbox.Executor, the same door,
// isolation and safety policy as MCP exec. A session's data is read from
// the moment the channel opens (preread.go): x/crypto keeps data nobody
// reads, up to its fixed 2 MiB window, so a session that receives
// MaxDataBeforeRequest bytes before its exec, shell or subsystem request
// is closed with the reason on its stderr. "session" channels are
// accepted, and "direct-tcpip" ones (`ssh -L`, forward.go) when the Config
// has a Forward function; no other channel type, and no global request
// but keepalive@openssh.com (remote forwarding would open a port).
//
// When a connection ends, for whatever reason, every process it started is
// killed with its whole tree. Shutdown closes the listeners and every
// connection (cause ErrShuttingDown) and waits for their sessions.
package sshd

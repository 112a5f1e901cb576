package sshws

import "github.com/agentbe/agentbe-daemon/ssh/sftpd"

// What one client can make the server hold, beyond the connection cap
// (Options.MaxConns). Each is a constant of the server; tests lower the
// Server's copies.
const (
	// maxChannelsPerConn bounds the open session channels of one SSH
	// connection (each holds a goroutine, channel buffers and maybe a
	// command or an SFTP server). One more is rejected with
	// ResourceShortage. OpenSSH's sshd has MaxSessions 10; the clients open
	// one or two, and `ssh -O` multiplexing a few more.
	maxChannelsPerConn = 64
	// maxHandlesPerConn bounds the open SFTP handles of one SSH connection,
	// all its SFTP sessions together (sftpd.DefaultMaxHandles).
	maxHandlesPerConn = sftpd.DefaultMaxHandles
	// maxFileOpsPerConn bounds the SFTP requests one SSH connection has in
	// the file system at once (sftpd.DefaultConnOps).
	maxFileOpsPerConn = sftpd.DefaultConnOps
	// maxFileOps bounds the SFTP requests in the file system at once on the
	// whole server (sftpd.DefaultServerOps).
	maxFileOps = sftpd.DefaultServerOps
)

// Package sftpd is the daemon's SFTP server: version 3 of the protocol
// (draft-ietf-secsh-filexfer-02, what OpenSSH, pkg/sftp and the
// agent-backend clients speak) over an fsops.Workspace, on any byte stream.
// The SSH server (sshws) runs it for the "sftp" subsystem of a session
// channel; Serve runs it on any io.ReadWriter.
//
// What it implements: INIT/VERSION (advertising hardlink@openssh.com,
// posix-rename@openssh.com and statvfs@openssh.com, as pkg/sftp did), OPEN,
// CLOSE, READ (at most 32 KiB an answer), WRITE, LSTAT, FSTAT, SETSTAT,
// FSETSTAT, OPENDIR, READDIR (batches of 100, with ls -l longnames),
// REMOVE, MKDIR, RMDIR, REALPATH, STAT, RENAME, READLINK, SYMLINK, and
// EXTENDED with those three extensions; anything else is OP_UNSUPPORTED. Answers are
// byte-for-byte those pkg/sftp's RequestServer (v1.13) gives for every
// request a client sends (server_test.go compares the two on a script of
// requests); where pkg/sftp answered a request no client sends oddly, this
// server answers plainly (the list is on Server).
//
// Paths are chrooted at the workspace: "/" is its root and ".." stops there
// (sftp.go); every file operation goes through fsops, which resolves and
// confines the path. Errors map to SFTP status codes in sftpErr (sftp.go).
//
// Each session is served on the goroutine that calls Serve: a request is
// read and handled before the next is read, so answers go out in order and
// a request costs no goroutine hand-off. While the client's next request
// has already arrived, answers wait to be sent together, up to 64 KiB
// (sftpFlushAt): fewer, fuller SSH packets for a client with requests in
// flight; none waits while Serve waits for the client.
//
// Limits (limits.go): one SSH connection's SFTP sessions share a
// ConnLimits — at most DefaultMaxHandles open handles, DefaultMaxListed
// directory entries held by open directory handles (OPEN or OPENDIR past
// either is answered FAILURE naming the limit) and DefaultConnOps requests
// in the file system at once — and the server's Shared limits bound all
// connections together: DefaultServerHandles handles, DefaultServerListed
// entries, and DefaultServerOps Slots, so the OS threads that requests stuck
// in the kernel can pin are bounded. A request over a slot limit waits.
//
// Abandon on close: a request stuck in the kernel (a hung network or FUSE
// file system) cannot be interrupted. When its channel closes, the SSH
// server calls Server.Abandon, which reports whether a request may still be
// in the file system; if so the session is over without it (neither the
// connection's end nor the server's shutdown waits), and the Serve
// goroutine closes the session's handles whenever the kernel lets it go.
// A malformed packet (a field longer than what is left, a length of 0 or
// over 256 KiB) ends the session with ErrMalformed or ErrPacketTooLong.
package sftpd

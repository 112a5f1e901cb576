package sshws

import (
	"context"
	"strconv"
	"sync/atomic"
)

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
	// maxHandlesPerConn bounds the open SFTP handles (files and directories)
	// of one SSH connection, all its SFTP sessions together: each file
	// handle is a descriptor, and a directory's holds its listing. An OPEN
	// or OPENDIR past it is answered FAILURE naming the limit.
	maxHandlesPerConn = 1024
	// maxFileOpsPerConn bounds the SFTP requests one SSH connection has in
	// the file system at once (one per SFTP session is possible: each
	// serves its requests in order). A request over it waits for a slot.
	maxFileOpsPerConn = 8
	// maxFileOps bounds the SFTP requests in the file system at once on the
	// whole server, those of connections already gone included (a request
	// stuck in the kernel on a hung file system keeps its slot until the
	// kernel returns). Each can hold an OS thread while it is in a system
	// call, so this keeps a client from pinning threads until the runtime's
	// limit (10,000) aborts the daemon. A request over it waits.
	maxFileOps = 256
)

// connLimits are one SSH connection's shares of the limits above, shared by
// its sessions.
type connLimits struct {
	maxHandles int32
	handles    atomic.Int32  // open SFTP handles, all sessions
	ops        chan struct{} // this connection's file-operation slots
	serverOps  chan struct{} // the server's, shared by every connection
}

func newConnLimits(maxHandles, ops int, serverOps chan struct{}) *connLimits {
	return &connLimits{maxHandles: int32(maxHandles), ops: make(chan struct{}, ops), serverOps: serverOps}
}

// takeHandle reserves one handle, or reports the limit reached.
func (l *connLimits) takeHandle() bool {
	if l.handles.Add(1) > l.maxHandles {
		l.handles.Add(-1)
		return false
	}
	return true
}

func (l *connLimits) dropHandle() { l.handles.Add(-1) }

func (l *connLimits) tooManyHandles() statusError {
	return statusError{stFailure, "too many open handles (limit " +
		strconv.Itoa(int(l.maxHandles)) + " per connection); close some first"}
}

// enter waits for a slot of the connection and one of the server, or
// until ctx ends. Uncontended, it waits for nothing.
func (l *connLimits) enter(ctx context.Context) error {
	select {
	case l.ops <- struct{}{}:
	default:
		select {
		case l.ops <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if l.serverOps == nil {
		return nil
	}
	select {
	case l.serverOps <- struct{}{}:
	default:
		select {
		case l.serverOps <- struct{}{}:
		case <-ctx.Done():
			<-l.ops
			return ctx.Err()
		}
	}
	return nil
}

// leave gives back the slots enter took.
func (l *connLimits) leave() {
	if l.serverOps != nil {
		<-l.serverOps
	}
	<-l.ops
}

package sftpd

import (
	"context"
	"strconv"
	"sync/atomic"
)

// Defaults of the SFTP limits; the SSH server passes them (or its own) to
// NewConnLimits and NewSlots.
const (
	// DefaultMaxHandles bounds the open SFTP handles (files and
	// directories) of one SSH connection, all its SFTP sessions together:
	// each file handle is a descriptor, and a directory's holds its
	// listing. An OPEN or OPENDIR past it is answered FAILURE naming the
	// limit.
	DefaultMaxHandles = 1024
	// DefaultConnOps bounds the SFTP requests one SSH connection has in the
	// file system at once (one per SFTP session is possible: each serves
	// its requests in order). A request over it waits for a slot.
	DefaultConnOps = 8
	// DefaultServerOps bounds the SFTP requests in the file system at once
	// on the whole server, those of connections already gone included (a
	// request stuck in the kernel on a hung file system keeps its slot
	// until the kernel returns). Each can hold an OS thread while it is in
	// a system call, so this keeps a client from pinning threads until the
	// runtime's limit (10,000) aborts the daemon. A request over it waits.
	DefaultServerOps = 256
)

// Slots are the server-wide slots for SFTP requests in the file system,
// shared by every connection's ConnLimits.
type Slots chan struct{}

// NewSlots makes n server-wide slots.
func NewSlots(n int) Slots { return make(Slots, n) }

// ConnLimits are one SSH connection's shares of the SFTP limits, shared by
// its SFTP sessions: the handles they hold together, the requests they have
// in the file system at once, and the server's slots (shared with every
// other connection).
type ConnLimits struct {
	maxHandles int32
	handles    atomic.Int32  // open SFTP handles, all sessions
	ops        chan struct{} // this connection's file-operation slots
	serverOps  Slots         // the server's, shared by every connection
}

// NewConnLimits makes one connection's limits: at most maxHandles open
// handles and ops requests in the file system at once, each of which also
// takes one of the server's slots (none when server is nil).
func NewConnLimits(maxHandles, ops int, server Slots) *ConnLimits {
	return &ConnLimits{maxHandles: int32(maxHandles), ops: make(chan struct{}, ops), serverOps: server}
}

// takeHandle reserves one handle, or reports the limit reached.
func (l *ConnLimits) takeHandle() bool {
	if l.handles.Add(1) > l.maxHandles {
		l.handles.Add(-1)
		return false
	}
	return true
}

func (l *ConnLimits) dropHandle() { l.handles.Add(-1) }

func (l *ConnLimits) tooManyHandles() statusError {
	return statusError{stFailure, "too many open handles (limit " +
		strconv.Itoa(int(l.maxHandles)) + " per connection); close some first"}
}

// enter waits for a slot of the connection and one of the server, or
// until ctx ends. Uncontended, it waits for nothing.
func (l *ConnLimits) enter(ctx context.Context) error {
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
func (l *ConnLimits) leave() {
	if l.serverOps != nil {
		<-l.serverOps
	}
	<-l.ops
}

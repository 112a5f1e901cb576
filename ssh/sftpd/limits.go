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
	// DefaultServerHandles bounds the open SFTP handles of the whole
	// server, every connection of /ssh and the SSH port together: each
	// file handle is a descriptor, and without it 64 connections at
	// DefaultMaxHandles would hold the 65,536 the systemd unit allows
	// (systemd/agentbe-daemon.service, LimitNOFILE), leaving none to
	// accept a connection or start a command. An OPEN or OPENDIR past it
	// is answered FAILURE naming the limit.
	DefaultServerHandles = 16384
	// DefaultMaxListed bounds the directory entries one connection's open
	// directory handles hold, all its SFTP sessions together. OPENDIR
	// reads the whole listing (sorted, with each entry's attributes, about
	// 200 bytes an entry) and READDIR hands it out 100 at a time, so
	// without a bound 1024 handles on one directory of 100,000 entries
	// would hold about 20 GiB. An entry is held from OPENDIR until READDIR
	// has sent the last batch or the handle is closed; an OPENDIR past it
	// is answered FAILURE naming the limit, so a directory of more entries
	// cannot be listed over SFTP at all.
	DefaultMaxListed = 1 << 18
	// DefaultServerListed bounds the directory entries held by the open
	// directory handles of the whole server (about 800 MiB of listings).
	DefaultServerListed = 1 << 22
)

// A Budget is a count that many connections hold together (the server's
// open handles, its listed directory entries), never over its max.
type Budget struct {
	max int64
	n   atomic.Int64
}

// NewBudget makes a budget of max.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

// Held is how much of the budget is held now.
func (b *Budget) Held() int64 { return b.n.Load() }

// take reserves n, or reports that it would go over the max. A nil budget
// bounds nothing.
func (b *Budget) take(n int64) bool {
	if b == nil {
		return true
	}
	if b.n.Add(n) > b.max {
		b.n.Add(-n)
		return false
	}
	return true
}

// give gives back n taken before.
func (b *Budget) give(n int64) {
	if b != nil {
		b.n.Add(-n)
	}
}

// Shared are the server-wide SFTP limits, which every connection's
// ConnLimits shares; a nil one bounds nothing.
type Shared struct {
	Ops     Slots   // requests in the file system at once
	Handles *Budget // open handles
	Listed  *Budget // directory entries held by open directory handles
}

// Slots are the server-wide slots for SFTP requests in the file system,
// shared by every connection's ConnLimits.
type Slots chan struct{}

// NewSlots makes n server-wide slots.
func NewSlots(n int) Slots { return make(Slots, n) }

// ConnLimits are one SSH connection's shares of the SFTP limits, shared by
// its SFTP sessions: the handles they hold together, the directory entries
// their open directory handles hold, the requests they have in the file
// system at once, and the server's shares of each (shared with every other
// connection).
type ConnLimits struct {
	handles Budget        // open SFTP handles, all sessions
	listed  Budget        // entries held by open directory handles
	ops     chan struct{} // this connection's file-operation slots
	server  Shared        // the server's, shared by every connection
}

// NewConnLimits makes one connection's limits: at most maxHandles open
// handles, DefaultMaxListed listed entries held, and ops requests in the
// file system at once, each of which also counts against server's (a nil
// one bounds nothing).
func NewConnLimits(maxHandles, ops int, server Shared) *ConnLimits {
	return &ConnLimits{
		handles: Budget{max: int64(maxHandles)},
		listed:  Budget{max: DefaultMaxListed},
		ops:     make(chan struct{}, ops),
		server:  server,
	}
}

// takeHandle reserves one handle of the connection and one of the server,
// or reports which limit was reached.
func (l *ConnLimits) takeHandle() error {
	if !l.handles.take(1) {
		return statusError{stFailure, "too many open handles (limit " +
			strconv.FormatInt(l.handles.max, 10) + " per connection); close some first"}
	}
	if !l.server.Handles.take(1) {
		l.handles.give(1)
		return statusError{stFailure, "too many open handles on this server (limit " +
			strconv.FormatInt(l.server.Handles.max, 10) + " for all connections); close some, or try again later"}
	}
	return nil
}

func (l *ConnLimits) dropHandle() {
	l.handles.give(1)
	l.server.Handles.give(1)
}

// takeListed reserves n listed entries of the connection and of the
// server, or reports which limit was reached.
func (l *ConnLimits) takeListed(n int) error {
	if !l.listed.take(int64(n)) {
		return statusError{stFailure, "directory listing of " + strconv.Itoa(n) + " entries refused: open directory handles may hold " +
			strconv.FormatInt(l.listed.max, 10) + " entries per connection; read to the end or close the others first"}
	}
	if !l.server.Listed.take(int64(n)) {
		l.listed.give(int64(n))
		return statusError{stFailure, "directory listing of " + strconv.Itoa(n) + " entries refused: open directory handles may hold " +
			strconv.FormatInt(l.server.Listed.max, 10) + " entries on this server; try again later"}
	}
	return nil
}

func (l *ConnLimits) dropListed(n int) {
	l.listed.give(int64(n))
	l.server.Listed.give(int64(n))
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
	if l.server.Ops == nil {
		return nil
	}
	select {
	case l.server.Ops <- struct{}{}:
	default:
		select {
		case l.server.Ops <- struct{}{}:
		case <-ctx.Done():
			<-l.ops
			return ctx.Err()
		}
	}
	return nil
}

// leave gives back the slots enter took.
func (l *ConnLimits) leave() {
	if l.server.Ops != nil {
		<-l.server.Ops
	}
	<-l.ops
}

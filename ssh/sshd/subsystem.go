package sshd

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/ssh/sftpd"
)

// A SubsystemHandler serves one kind of "subsystem" request ("sftp"), named
// by its key in the table NewConfig makes for every listener.
type SubsystemHandler interface {
	// Start is called on the session's request loop, once the request is
	// accepted; ch is the channel, the subsystem's stdin and stdout. ctx
	// ends when the connection does. The Subsystem it returns is served on
	// a goroutine of its own.
	Start(ctx context.Context, conn *Conn, ch io.ReadWriter) Subsystem
}

// A Subsystem serves one session channel.
type Subsystem interface {
	// Serve runs until the client closes the channel (the subsystem's
	// reads end) or the connection ends. Its error is logged at debug
	// level; nil, io.EOF and context.Canceled mean a normal end.
	Serve() error
	// Abandon is called when the channel closed while Serve may still
	// run. It reports whether Serve may be stuck where nothing can
	// interrupt it (a system call on a hung file system): then the session
	// ends without waiting for it.
	Abandon() (stuck bool)
}

// Workspace is the workspace the server serves, for subsystem handlers.
func (conn *Conn) Workspace() fsops.Workspace {
	if conn.ws != nil {
		return conn.ws
	}
	return conn.srv.cfg.Workspace
}

// Logger is the server's logger, for subsystem handlers.
func (conn *Conn) Logger() *slog.Logger { return conn.srv.log }

// SFTPLimits are what the SFTP subsystem lets one connection, and the
// server, hold (package sftpd, limits.go).
type SFTPLimits struct {
	// MaxHandles caps the open handles of one connection, all its SFTP
	// sessions together; 0 means sftpd.DefaultMaxHandles.
	MaxHandles int
	// ConnOps caps the requests one connection has in the file system at
	// once; 0 means sftpd.DefaultConnOps.
	ConnOps int
	// ServerOps are the server-wide slots, shared by every connection;
	// nil makes sftpd.DefaultServerOps of them for this handler.
	ServerOps sftpd.Slots
	// ServerHandles bounds the open handles of every connection
	// together; nil makes a budget of sftpd.DefaultServerHandles for this
	// handler.
	ServerHandles *sftpd.Budget
	// ServerListed bounds the directory entries every connection's open
	// directory handles hold together; nil makes a budget of
	// sftpd.DefaultServerListed for this handler.
	ServerListed *sftpd.Budget
}

// SFTP is the "sftp" subsystem: package sftpd's server over the
// connection's workspace, within lim.
func SFTP(lim SFTPLimits) SubsystemHandler {
	if lim.MaxHandles <= 0 {
		lim.MaxHandles = sftpd.DefaultMaxHandles
	}
	if lim.ConnOps <= 0 {
		lim.ConnOps = sftpd.DefaultConnOps
	}
	if lim.ServerOps == nil {
		lim.ServerOps = sftpd.NewSlots(sftpd.DefaultServerOps)
	}
	if lim.ServerHandles == nil {
		lim.ServerHandles = sftpd.NewBudget(sftpd.DefaultServerHandles)
	}
	if lim.ServerListed == nil {
		lim.ServerListed = sftpd.NewBudget(sftpd.DefaultServerListed)
	}
	return sftpHandler(lim)
}

type sftpHandler SFTPLimits

// sftpLimitsKey keys a connection's sftpd.ConnLimits (Conn.Value).
type sftpLimitsKey struct{}

func (h sftpHandler) Start(ctx context.Context, conn *Conn, ch io.ReadWriter) Subsystem {
	lim := conn.Value(sftpLimitsKey{}, func() any {
		return sftpd.NewConnLimits(h.MaxHandles, h.ConnOps,
			sftpd.Shared{Ops: h.ServerOps, Handles: h.ServerHandles, Listed: h.ServerListed})
	}).(*sftpd.ConnLimits)
	return &sftpSubsystem{sftpd.NewServer(ctx, conn.Workspace(), ch, lim), conn}
}

// sftpSubsystem is one SFTP session: our own server (package sftpd), which
// answers each request inline on the Serve goroutine.
type sftpSubsystem struct {
	*sftpd.Server
	conn *Conn
}

// Serve serves the session and logs how it ended. Its frame stays small
// (the logging is in sftpEnded): it sits under every request's stack.
func (s *sftpSubsystem) Serve() error {
	if err := s.Server.Serve(); err != nil {
		sftpEnded(s.conn, err)
	}
	return nil
}

// sftpEnded logs the end of an SFTP session, unless it was a normal one.
//
//go:noinline
func sftpEnded(conn *Conn, err error) {
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, sftpd.ErrAbandoned) || errors.Is(err, context.Canceled):
	case errors.Is(err, sftpd.ErrMalformed) || errors.Is(err, sftpd.ErrPacketTooLong):
		// A client bug (or not an SFTP client): its session ends, and
		// whoever looks into "my upload stopped" needs to see why.
		conn.Logger().Warn("sftp session ended: the client sent a malformed packet",
			"remote", conn.remote, "err", err)
	default:
		conn.Logger().Debug("sftp session ended", "remote", conn.remote, "err", err)
	}
}

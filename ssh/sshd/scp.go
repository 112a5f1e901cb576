package sshd

import (
	"context"
	"errors"
	"io"

	"github.com/agentbe/agentbe-daemon/ssh/scpd"
)

// A CommandHandler serves some "exec" requests itself, in place of the
// executor; NewConfig names the handlers every listener has (SCP).
type CommandHandler interface {
	// StartCommand is called on the session's request loop for every exec
	// request. It returns nil for a command that is not its own, which
	// then goes to the executor. Otherwise the Subsystem it returns serves
	// the channel (ch: its stdin and stdout; stderr: its stderr) on a
	// goroutine of its own; its exit status is 0 unless it is an ExitCoder.
	StartCommand(ctx context.Context, conn *Conn, command string, ch io.ReadWriter, stderr io.Writer) Subsystem
}

// ExitCoder is a Subsystem with an exit status of its own, reported when
// its Serve returns.
type ExitCoder interface {
	ExitCode() int
}

// SCP serves the legacy scp protocol (`scp -t` and `scp -f`, which OpenSSH's
// `scp -O` and older clients ask for) with package scpd over the
// connection's workspace: no shell, no scp binary, the same path rules as
// SFTP. Any other command goes on to the executor.
func SCP() CommandHandler { return scpHandler{} }

type scpHandler struct{}

func (scpHandler) StartCommand(ctx context.Context, conn *Conn, command string, ch io.ReadWriter, stderr io.Writer) Subsystem {
	cmd, err := scpd.ParseCommand(command)
	if errors.Is(err, scpd.ErrNotSCP) {
		return nil
	}
	if err != nil {
		return &refusedCommand{stderr: stderr, msg: "scp: " + err.Error() + "\n"}
	}
	return &scpSubsystem{scpd.NewSession(ctx, conn.Workspace(), cmd, ch, conn.Logger())}
}

type scpSubsystem struct{ *scpd.Session }

// Abandon reports false: once the channel is closed every read and write
// on it fails, so Serve returns after the file system call it is in.
func (*scpSubsystem) Abandon() bool { return false }

// refusedCommand is a command the handler recognised but cannot serve: its
// reason goes to stderr, with exit status 1.
type refusedCommand struct {
	stderr io.Writer
	msg    string
}

func (r *refusedCommand) Serve() error {
	_, err := io.WriteString(r.stderr, r.msg)
	return err
}
func (*refusedCommand) Abandon() bool { return false }
func (*refusedCommand) ExitCode() int { return 1 }

package sshd

import (
	"context"
	"io"
	"net"

	gossh "golang.org/x/crypto/ssh"
)

// PermNoPortForwarding refuses direct-tcpip channels (authorized_keys'
// no-port-forwarding and restrict; a certificate without
// permit-port-forwarding).
const PermNoPortForwarding = "no-port-forwarding"

// ForwardRequest is one direct-tcpip channel open (`ssh -L`), as the
// client sent it (RFC 4254 section 7.2), with who sent it. Host and Port
// are unchecked: the Forward function judges them.
type ForwardRequest struct {
	Host string
	Port uint32
	// Within is the host path of the workspace the connection works in
	// (its scope's, after Confine).
	Within string
	Remote string // the client's address
	Scope  string // as SessionRecord.Scope
	Caller string // as SessionRecord.Caller
}

// ForwardFunc opens the connection a direct-tcpip channel carries, or
// refuses it with an error whose text the client is shown.
type ForwardFunc func(ctx context.Context, req ForwardRequest) (net.Conn, error)

// directTCPIP is the direct-tcpip channel's extra data. The originator
// fields are the client's say-so about its own end, used for nothing.
type directTCPIP struct {
	Host       string
	Port       uint32
	OriginHost string
	OriginPort uint32
}

// openForward serves a direct-tcpip channel: the client's end of `ssh -L`.
// The channel counts against MaxChannels like a session (its slot is
// released when it ends, and before a refusal is sent, so the client can
// open another at once). The connection is opened before the channel is
// accepted, so a refusal reaches the client as a channel open failure with
// the reason ("channel 2: open failed: connect failed: ..." in OpenSSH).
func (s *Server) openForward(ctx context.Context, conn *Conn, nc gossh.NewChannel, sl *slot) {
	reject := func(reason gossh.RejectionReason, msg string) {
		sl.release()
		s.log.Info("port forward refused", "remote", conn.remote, "reason", msg)
		_ = nc.Reject(reason, msg)
	}
	switch {
	case s.cfg.Forward == nil:
		reject(gossh.Prohibited, "port forwarding is off on this server (the daemon's --previews flag)")
		return
	case conn.noExec:
		reject(gossh.Prohibited, "port forwarding needs a token that may run commands")
		return
	case conn.denied(PermNoPortForwarding):
		reject(gossh.Prohibited, "port forwarding is not permitted for this key (no-port-forwarding or restrict)")
		return
	}
	var req directTCPIP
	if err := gossh.Unmarshal(nc.ExtraData(), &req); err != nil {
		reject(gossh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	ws := conn.ws
	if ws == nil {
		ws = s.cfg.Workspace
	}
	fr := ForwardRequest{Host: req.Host, Port: req.Port, Within: ws.Root(), Remote: conn.remote, Scope: conn.scope, Caller: conn.caller}
	if !s.goTracked(func() {
		defer sl.release()
		backend, err := s.cfg.Forward(ctx, fr)
		if err != nil {
			sl.release()
			s.log.Info("port forward refused", "remote", conn.remote, "port", req.Port, "reason", err)
			_ = nc.Reject(gossh.ConnectionFailed, err.Error())
			return
		}
		ch, reqs, err := nc.Accept()
		if err != nil {
			_ = backend.Close()
			return
		}
		go gossh.DiscardRequests(reqs)
		splice(ctx, ch, backend, sl.end)
	}) {
		reject(gossh.ResourceShortage, ErrShuttingDown.Error())
	}
}

// splice copies both ways until both directions ended, passing each EOF on
// as a half close, and closes both ends; the connection's end (ctx) closes
// them at once. ended is called once both directions have ended, before
// the client is told (the server's last EOF, or its close).
func splice(ctx context.Context, ch gossh.Channel, backend net.Conn, ended func()) {
	stop := context.AfterFunc(ctx, func() { _ = ch.Close(); _ = backend.Close() })
	defer stop()
	// clientEOF is closed when the client's data has ended, before the
	// backend is told: a backend that closes in answer to its EOF is
	// seen closing after it.
	clientEOF, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(backend, ch)
		close(clientEOF)
		if cw, ok := backend.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = backend.Close()
		}
	}()
	_, _ = io.Copy(ch, backend)
	select {
	case <-clientEOF:
		// The client half-closed first: the EOF sent now ends the channel
		// for it.
		ended()
	default:
	}
	_ = ch.CloseWrite()
	<-done
	ended()
	_ = backend.Close()
	_ = ch.Close()
}

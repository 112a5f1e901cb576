package mcphttp

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file: the calls the SDK runs for a stdio session end with the
// session. The SDK gives a stdio call a context that closing its session
// does not cancel (over stdio nothing but the client's
// notifications/cancelled does), so Close, or the cancellation of
// ServeStdio's context, would wait for each running call to end on its
// own: a command until its timeout. The fast path's calls end with the
// session already (stdioFast.stop).

// sessionCalls are the running SDK calls of one stdio session.
type sessionCalls struct {
	ended   bool // the session is ending: a call that starts now is cancelled
	cancels map[*context.CancelFunc]struct{}
}

// stdioCallContext is ctx, cancelled too when ss's session is ended
// (endStdioCalls); done releases it when the call returns. An entry is
// made by whichever comes first, the call or ServeStdio (the SDK may run a
// call before ServeStdio's Connect has returned).
func (s *Server) stdioCallContext(ctx context.Context, ss *mcp.ServerSession) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	s.stdioCallsMu.Lock()
	sc := s.sessionCallsLocked(ss)
	if sc.ended {
		s.stdioCallsMu.Unlock()
		cancel()
		return ctx, func() {}
	}
	key := &cancel
	sc.cancels[key] = struct{}{}
	s.stdioCallsMu.Unlock()
	return ctx, func() {
		s.stdioCallsMu.Lock()
		delete(sc.cancels, key)
		s.stdioCallsMu.Unlock()
		cancel()
	}
}

// endStdioCalls cancels ss's running calls, and any that starts after.
func (s *Server) endStdioCalls(ss *mcp.ServerSession) {
	s.stdioCallsMu.Lock()
	defer s.stdioCallsMu.Unlock()
	sc := s.sessionCallsLocked(ss)
	sc.ended = true
	for c := range sc.cancels {
		(*c)()
	}
}

// forgetStdioCalls drops ss's entry once its session is over (ServeStdio
// returns after the SDK's last call for it).
func (s *Server) forgetStdioCalls(ss *mcp.ServerSession) {
	s.stdioCallsMu.Lock()
	delete(s.stdioCalls, ss)
	s.stdioCallsMu.Unlock()
}

func (s *Server) sessionCallsLocked(ss *mcp.ServerSession) *sessionCalls {
	if s.stdioCalls == nil {
		s.stdioCalls = map[*mcp.ServerSession]*sessionCalls{}
	}
	sc := s.stdioCalls[ss]
	if sc == nil {
		sc = &sessionCalls{cancels: map[*context.CancelFunc]struct{}{}}
		s.stdioCalls[ss] = sc
	}
	return sc
}

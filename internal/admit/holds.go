package admit

import (
	"context"
	"fmt"
	"sync"

	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

// Holds are what callers keep open past their admission: a /gateway or
// /ssh WebSocket connection, an MCP session's GET stream. Every request on
// /mcp, /execute, /tools, /preview/ and /site/ is admitted on its own with
// the token set in force; a connection is admitted once, so a reload of
// the token file (Rules.Rejudge) judges each hold again, and ends the
// ones whose credential no longer names the identity they were admitted
// with: the token was removed, or its scope, readOnly or exec changed.
// Their context ends with a *Revoked cause, which the face turns into a
// close that says why. One Holds serves every copy of the daemon's Rules.
type Holds struct {
	mu sync.Mutex
	m  map[*hold]struct{}
}

type hold struct {
	c Caller
	// by is the token rule c was admitted by (the Rules' Token, or its
	// Operator for the operator), judged again on Rejudge whichever copy
	// of the Rules that is called on: every copy shares the rotated
	// tokens and the swapped set.
	by     httpguard.Token
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// NewHolds returns an empty set of holds, for Rules.Holds.
func NewHolds() *Holds { return &Holds{m: map[*hold]struct{}{}} }

// Revoked is the cause a hold's context ends with when a reload took its
// token away (Removed) or changed what the token may do.
type Revoked struct {
	Name     string // the token file entry's name; "" for the daemon's or the operator's token
	Operator bool   // the operator's token (--operator-token-file)
	Removed  bool
}

// Unauthorized reports whether the token is gone (as Refusal.Unauthorized:
// a WebSocket closes with 4001, which the clients take as "stop"); a token
// whose rights changed closes with 1008, and a new connection gets them.
func (e *Revoked) Unauthorized() bool { return e.Removed }

func (e *Revoked) Error() string {
	switch {
	case e.Operator:
		return "the operator's token was replaced (--operator-token-file was reloaded)"
	case e.Name == "":
		return "the daemon's token was replaced (--auth-token-file was reloaded)"
	}
	if e.Removed {
		return fmt.Sprintf("token %q was removed from the token file", e.Name)
	}
	return fmt.Sprintf("token %q's scope or rights changed in the token file; reconnect", e.Name)
}

// Hold registers what c keeps open: the returned context, derived from
// parent, ends with a *Revoked cause (context.Cause) when a reload
// revokes or changes c's token, at once if that happened since c was
// admitted. release ends the hold (and its context). Without Rules.Holds
// the context ends only with parent or release.
func (ru *Rules) Hold(parent context.Context, c Caller) (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancelCause(parent)
	if ru.Holds == nil {
		return ctx, func() { cancel(nil) }
	}
	h := &hold{c: c, by: ru.Token, ctx: ctx, cancel: cancel}
	if c.Operator {
		h.by = ru.Operator
	}
	hs := ru.Holds
	hs.mu.Lock()
	hs.m[h] = struct{}{}
	hs.mu.Unlock()
	// A reload between the admission and the registration above has
	// already judged the holds it found: judge this one against the set in
	// force now.
	ru.judge(h)
	return ctx, func() {
		hs.mu.Lock()
		delete(hs.m, h)
		hs.mu.Unlock()
		cancel(nil)
	}
}

// Rejudge judges every hold with the token set in force (call it after a
// reload has put the new set in force) and ends those whose credential no
// longer names the identity they were admitted with. It returns how many
// it ended.
func (ru *Rules) Rejudge() int {
	if ru.Holds == nil {
		return 0
	}
	ru.Holds.mu.Lock()
	hs := make([]*hold, 0, len(ru.Holds.m))
	for h := range ru.Holds.m {
		hs = append(hs, h)
	}
	ru.Holds.mu.Unlock()
	n := 0
	for _, h := range hs {
		if ru.judge(h) {
			n++
		}
	}
	return n
}

// judge ends h if its credential names another identity now, and says
// whether it did (a hold that has ended already is left).
func (ru *Rules) judge(h *hold) bool {
	if h.ctx.Err() != nil {
		return false
	}
	id, ok := h.by.Reidentify(h.c.cred)
	if ok && id == h.c.Identity {
		return false
	}
	h.cancel(&Revoked{Name: h.c.Name, Operator: h.c.Operator, Removed: !ok})
	return true
}

// RevokedBy is the *Revoked cause ctx (a Hold's) ended with, or nil.
func RevokedBy(ctx context.Context) *Revoked {
	r, _ := context.Cause(ctx).(*Revoked)
	return r
}

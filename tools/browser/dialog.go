package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/clip"
)

// A page can stop itself, and so every call on its session: a JavaScript
// dialog (alert, confirm, prompt, beforeunload) holds the page until it is
// answered, and a script that never returns holds the renderer's main
// thread, which nearly every DevTools command waits for. This file answers
// the dialogs and frees a page that a script holds.
//
// Dialogs: each is answered as it opens (alert and beforeunload accepted,
// confirm and prompt dismissed: the page gets false and null), on the
// tab's own DevTools session, and recorded; the result of the next call
// that returns (the one the dialog opened during, as a rule) lists them, at
// most MaxDialogs with each message cut to MaxTextPerNode bytes, and counts
// the rest. A page that opens more than maxDialogsBeforeLeave dialogs
// before a result reports them is left: the tab is sent to about:blank
// (Runtime.terminateExecution took Chromium 156 several seconds, and
// hundreds more dialogs, to stop a loop of alerts; about:blank takes well
// under a second).
//
// Busy pages: when a call ends at its limit (or its caller gives up), the
// page is asked a trivial question (Runtime.evaluate of "0"). A page that
// answers was only slow (a load that did not finish) and is left alone.
// One that does not is running a script: Runtime.terminateExecution stops
// it (Chromium runs it on an interrupt of the running script, so it works
// while the script runs; an inline script's page then finishes loading),
// and the page is asked again, twice, half a second apart (a timer can
// start the loop again). If it still does not answer (such a timer, or a
// renderer that crashed), the tab is sent to about:blank, which Chromium
// loads in a new renderer, and asked once more. The call's error says which was done; the next call does not wait
// for the busy page. browser.close ends a session whatever it is doing (it
// does not wait for the call's lock).

// MaxDialogs bounds the dialogs one result lists; the others are counted
// in dialogsOmitted.
const MaxDialogs = 20

// maxDialogsBeforeLeave is how many dialogs a page may open before a
// result reports them; past it, the tab leaves the page for about:blank.
const maxDialogsBeforeLeave = 100

// probeWait is how long a page has to answer the first question after a
// call's limit; recheckWait is the time it has after it was stopped or
// left, and the bound on those commands.
const (
	probeWait   = time.Second
	recheckWait = 2 * time.Second
)

// dialogRecord is one dialog as a result reports it.
type dialogRecord struct {
	Type     string `json:"type"`
	Message  string `json:"message"`
	Accepted bool   `json:"accepted"`
}

// dialogLog is what the page opened since a result last reported it.
type dialogLog struct {
	shown []dialogRecord
	count int
	left  bool // past maxDialogsBeforeLeave: the tab left the page
}

// acceptsDialog is the answer to a dialog: an alert has only one, and
// beforeunload is asked when the page is left, which a call asked for;
// confirm and prompt are dismissed (the page gets false and null).
func acceptsDialog(t page.DialogType) bool {
	return t == page.DialogTypeAlert || t == page.DialogTypeBeforeunload
}

// noteDialog records a dialog that opened, and says whether the tab is to
// leave the page. It runs on the tab's reader goroutine.
func (s *session) noteDialog(e *page.EventJavascriptDialogOpening) (leave bool) {
	s.dialogMu.Lock()
	defer s.dialogMu.Unlock()
	l := &s.dialogs
	l.count++
	if len(l.shown) < MaxDialogs {
		l.shown = append(l.shown, dialogRecord{Type: string(e.Type), Message: clip.String(e.Message, MaxTextPerNode), Accepted: acceptsDialog(e.Type)})
	}
	if l.count == maxDialogsBeforeLeave+1 {
		l.left = true
		return true
	}
	return false
}

// takeDialogs returns the dialogs not yet reported and forgets them.
func (s *session) takeDialogs() dialogLog {
	s.dialogMu.Lock()
	defer s.dialogMu.Unlock()
	l := s.dialogs
	s.dialogs = dialogLog{}
	return l
}

// answerDialog answers a dialog of the tab (and first sends the tab away
// from the page when leave is set). A dialog holds its page until it is
// answered, so at most one of the tab's is open, and waits here, at a time.
func (p *Provider) answerDialog(s *session, typ page.DialogType, leave bool) {
	if leave {
		p.log.Info("browser page opened too many dialogs; leaving it", "session", s.id, "dialogs", maxDialogsBeforeLeave)
		go p.leavePage(s)
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (cdp.Empty, error) {
		return cdp.Call(ctx, t, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: acceptsDialog(typ)})
	})
	if err != nil && s.ctx.Err() == nil {
		// The dialog may be gone already (the page navigated).
		p.log.Debug("browser dialog not answered", "session", s.id, "type", typ, "reason", err)
	}
}

// leavePage sends the tab to about:blank, whatever the page is doing:
// Chromium loads it in a new renderer when the page's does not answer.
func (p *Provider) leavePage(s *session) error {
	ctx, cancel := context.WithTimeout(s.ctx, recheckWait)
	defer cancel()
	_, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (page.NavigateResult, error) {
		return cdp.Call(ctx, t, page.Navigate, page.NavigateParams{URL: "about:blank"})
	})
	return err
}

// terminate stops the script the page runs now (or the next one it runs).
func (p *Provider) terminate(s *session, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(s.ctx, wait)
	defer cancel()
	_, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (cdp.Empty, error) {
		return cdp.Call(ctx, t, runtime.TerminateExecution, cdp.Empty{})
	})
	return err
}

// responsive asks the page a trivial question and reports whether it
// answered within wait. An error other than the wait's end (no execution
// context during a navigation) is an answer: the page is not held by a
// script. A crashed renderer does not answer.
func (p *Provider) responsive(s *session, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(s.ctx, wait)
	defer cancel()
	_, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (runtime.EvaluateResult, error) {
		return cdp.Call(ctx, t, runtime.Evaluate, runtime.EvaluateParams{Expression: "0", ReturnByValue: ptr(true), Silent: ptr(true)})
	})
	return !errors.Is(err, context.DeadlineExceeded) || s.ctx.Err() != nil
}

// recoverPage runs after a call whose context ended: it frees a page that
// a script holds. It returns what the call's error should add ("" when the
// page was not held).
func (p *Provider) recoverPage(s *session) string {
	if p.responsive(s, probeWait) {
		return ""
	}
	p.log.Info("browser page busy past the call's limit; stopping its script", "session", s.id)
	_ = p.terminate(s, recheckWait)
	if p.responsive(s, recheckWait) {
		time.Sleep(500 * time.Millisecond)
		if p.responsive(s, recheckWait) {
			return "the page ran a script that did not stop; the script was stopped (the page may be half done)"
		}
	}
	p.log.Info("browser page still busy after its script was stopped; leaving it", "session", s.id)
	if err := p.leavePage(s); err == nil && p.responsive(s, recheckWait) {
		return "the page did not answer, even after its script was stopped (a script that starts again, or a renderer that crashed): " +
			"the tab was sent to about:blank (the page is gone; load it again with browser.goto)"
	}
	return "the page is not responding, even after its script was stopped and the tab sent to about:blank; close the session with browser.close and start another"
}

// withDialogs adds the dialogs l lists to a call's result: to a success,
// as dialogs (and dialogsOmitted, dialogsLeft, untrusted); to an error,
// as a sentence.
func withDialogs(res *mcp.CallToolResult, l dialogLog) *mcp.CallToolResult {
	if l.count == 0 || res == nil || len(res.Content) == 0 {
		return res
	}
	last := len(res.Content) - 1
	tc, ok := res.Content[last].(*mcp.TextContent)
	if !ok {
		return res
	}
	left := fmt.Sprintf("the page opened more than %d dialogs; the tab left it for about:blank", maxDialogsBeforeLeave)
	if res.IsError {
		var b strings.Builder
		fmt.Fprintf(&b, "; the page opened %d JavaScript dialog(s), answered at once:", l.count)
		for i, d := range l.shown {
			if i == 3 {
				b.WriteString(" …")
				break
			}
			fmt.Fprintf(&b, " %s %q", d.Type, clip.String(d.Message, 60))
		}
		if l.left {
			b.WriteString("; " + left)
		}
		tc.Text += b.String()
		return res
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal([]byte(tc.Text), &out); err != nil || out == nil {
		return res
	}
	set := func(k string, v any) {
		b, _ := json.Marshal(v)
		out[k] = b
	}
	set("dialogs", l.shown)
	if n := l.count - len(l.shown); n > 0 {
		set("dialogsOmitted", n)
	}
	if l.left {
		set("dialogsLeft", left)
	}
	set("untrusted", untrustedNote) // the messages are the page's text
	b, err := json.Marshal(out)
	if err != nil {
		return res
	}
	tc.Text = string(b)
	res.StructuredContent = json.RawMessage(b)
	return res
}

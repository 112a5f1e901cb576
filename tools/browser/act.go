package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/clip"
)

// target resolves what an act or extract names, a ref or a CSS selector, to
// a JavaScript object id. The selector reaches the page as an argument of a
// constant function, never as source text.
func (p *Provider) target(ctx context.Context, s *session, t *chromedp.Target, op, ref, selector string) (runtime.RemoteObjectID, error) {
	switch {
	case ref != "" && selector != "":
		return "", errcode.New(errcode.InvalidArgument, op, "", "give ref or selector, not both")
	case ref != "":
		s.refMu.Lock()
		id, err := s.refs.lookup(ref)
		s.refMu.Unlock()
		if err != nil {
			return "", errcode.New(errcode.InvalidArgument, op, "", "%v", err)
		}
		world, err := isolatedWorld(ctx, t)
		if err != nil {
			return "", err
		}
		res, err := cdp.Call(ctx, t, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: id, ExecutionContextID: world})
		if err != nil {
			return "", argError(ctx, op, "ref %q: the node is gone from the page (%v); take a new browser.snapshot", ref, err)
		}
		return res.Object.ObjectID, nil
	case selector != "":
		objs, err := querySelector(ctx, t, selector, 1)
		if err != nil {
			return "", argError(ctx, op, "selector %q: %v", clip.String(selector, 100), err)
		}
		if len(objs) == 0 {
			return "", errcode.New(errcode.InvalidArgument, op, "", "selector %q matched no element", clip.String(selector, 100))
		}
		return objs[0], nil
	}
	return "", errcode.New(errcode.InvalidArgument, op, "", "give ref (from a snapshot) or selector (CSS)")
}

// argError is the client's error about the page (a ref, a selector, an
// element), unless the call's context ended meanwhile: a page that did not
// answer in time is a timeout, not a bad argument.
func argError(ctx context.Context, op, format string, args ...any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return errcode.New(errcode.InvalidArgument, op, "", format, args...)
}

// querySelector returns up to limit elements matching selector, in
// document order.
func querySelector(ctx context.Context, t *chromedp.Target, selector string, limit int) ([]runtime.RemoteObjectID, error) {
	if len(selector) > MaxSelectorLen {
		return nil, fmt.Errorf("is %d bytes long; the limit is %d", len(selector), MaxSelectorLen)
	}
	doc, err := evaluateObject(ctx, t, "document")
	if err != nil {
		return nil, err
	}
	arr, err := callOn[runtime.RemoteObjectID](ctx, t, doc, false,
		`function(sel, limit) { return Array.from(this.querySelectorAll(sel)).slice(0, limit); }`, selector, limit)
	if err != nil {
		return nil, err
	}
	props, err := cdp.Call(ctx, t, runtime.GetProperties, runtime.GetPropertiesParams{ObjectID: arr, OwnProperties: ptr(true)})
	if err != nil {
		return nil, err
	}
	var out []runtime.RemoteObjectID
	for _, pr := range props.Result {
		if pr.Enumerable && pr.Value != nil && pr.Value.ObjectID != "" {
			out = append(out, pr.Value.ObjectID)
		}
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

// callOn calls a constant function on obj with args passed as JSON values
// (data, not code). With byValue the result is decoded into T; otherwise T
// must be runtime.RemoteObjectID and is the result's object id.
func callOn[T any](ctx context.Context, t *chromedp.Target, obj runtime.RemoteObjectID, byValue bool, fn string, args ...any) (T, error) {
	var zero T
	params := runtime.CallFunctionOnParams{FunctionDeclaration: fn, ObjectID: obj, ReturnByValue: &byValue, Silent: ptr(true)}
	for _, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			return zero, err
		}
		params.Arguments = append(params.Arguments, &runtime.CallArgument{Value: b})
	}
	res, err := cdp.Call(ctx, t, runtime.CallFunctionOn, params)
	if err != nil {
		return zero, err
	}
	if res.ExceptionDetails != nil {
		msg := res.ExceptionDetails.Text
		if ex := res.ExceptionDetails.Exception; ex != nil && ex.Description != "" {
			msg = strings.SplitN(ex.Description, "\n", 2)[0]
		}
		// The page can make the exception (its script runs in the page:
		// a getter, a replaced built-in) and write its text: it reaches an
		// error result, which carries no untrusted mark, cut as a
		// snapshot's line is.
		return zero, errors.New(quote(msg))
	}
	if res.Result == nil {
		return zero, errors.New("no result")
	}
	if !byValue {
		if id, ok := any(res.Result.ObjectID).(T); ok {
			return id, nil
		}
		return zero, errors.New("no object")
	}
	var v T
	if len(res.Result.Value) == 0 {
		return zero, nil
	}
	if err := json.Unmarshal(res.Result.Value, &v); err != nil {
		return zero, err
	}
	return v, nil
}

// center scrolls obj into view and returns the middle of its box.
func center(ctx context.Context, t *chromedp.Target, obj runtime.RemoteObjectID) (float64, float64, error) {
	_, _ = cdp.Call(ctx, t, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{ObjectID: obj})
	box, err := cdp.Call(ctx, t, dom.GetBoxModel, dom.GetBoxModelParams{ObjectID: obj})
	if err != nil {
		return 0, 0, fmt.Errorf("the element has no box (hidden or detached): %w", err)
	}
	q := box.Model.Content
	if len(q) < 8 {
		return 0, 0, errors.New("the element has no box")
	}
	return (q[0] + q[2] + q[4] + q[6]) / 4, (q[1] + q[3] + q[5] + q[7]) / 4, nil
}

// namedKeys are the key names press accepts besides single characters.
var namedKeys = func() map[string]*kb.Key {
	m := map[string]*kb.Key{}
	for _, k := range kb.Keys {
		if len(k.Key) > 1 {
			m[k.Key] = k
		}
	}
	return m
}()

// keyEvents are the events of pressing key: a name like Enter, Tab,
// ArrowDown, Escape, or one character.
func keyEvents(key string) ([]*input.DispatchKeyEventParams, error) {
	if key == "Space" {
		key = " "
	}
	if k, ok := namedKeys[key]; ok {
		down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: k.Key, Code: k.Code, WindowsVirtualKeyCode: k.Windows, NativeVirtualKeyCode: k.Native, Text: k.Text, UnmodifiedText: k.Unmodified}
		if !k.Print {
			down.Type = input.DispatchKeyEventTypeRawKeyDown
			down.Text, down.UnmodifiedText = "", ""
		}
		up := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyUp, Key: k.Key, Code: k.Code, WindowsVirtualKeyCode: k.Windows, NativeVirtualKeyCode: k.Native}
		return []*input.DispatchKeyEventParams{&down, &up}, nil
	}
	if r := []rune(key); len(r) == 1 {
		return kb.Encode(r[0]), nil
	}
	return nil, fmt.Errorf("key %q is not a key name (Enter, Tab, Escape, Backspace, Delete, ArrowUp, ArrowDown, ArrowLeft, ArrowRight, Home, End, PageUp, PageDown, Space) or one character", clip.String(key, 40))
}

type actArgs struct {
	SessionID string   `json:"sessionId"`
	Type      string   `json:"type"`
	Ref       string   `json:"ref,omitempty"`
	Selector  string   `json:"selector,omitempty"`
	Text      *string  `json:"text,omitempty"`
	Key       string   `json:"key,omitempty"`
	DeltaY    *float64 `json:"deltaY,omitempty"`
}

// act does one interaction and waits for a navigation it started.
func (p *Provider) act(ctx context.Context, s *session, a actArgs) error {
	const op = "browser.act"
	switch a.Type {
	case "click", "hover", "select", "type", "press", "scroll":
	default:
		return errcode.New(errcode.InvalidArgument, op, "", "type %q is not one of click, type, press, select, hover, scroll", clip.String(a.Type, 20))
	}
	if a.Text != nil && len(*a.Text) > MaxTypeChars {
		return errcode.New(errcode.InvalidArgument, op, "", "text is %d bytes long; the limit is %d", len(*a.Text), MaxTypeChars)
	}
	navBefore := s.navStarted.Load()
	_, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		var none chromedp.Void
		switch a.Type {
		case "click", "hover":
			obj, err := p.target(ctx, s, t, op, a.Ref, a.Selector)
			if err != nil {
				return none, err
			}
			x, y, err := center(ctx, t, obj)
			if err != nil {
				return none, argError(ctx, op, "%v", err)
			}
			if _, err := cdp.Call(ctx, t, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseMoved, X: x, Y: y}); err != nil {
				return none, err
			}
			if a.Type == "hover" {
				return none, nil
			}
			for _, typ := range []input.DispatchMouseEventType{input.DispatchMouseEventTypeMousePressed, input.DispatchMouseEventTypeMouseReleased} {
				if _, err := cdp.Call(ctx, t, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: typ, X: x, Y: y, Button: input.MouseButtonLeft, Buttons: 1, ClickCount: 1}); err != nil {
					return none, err
				}
			}
		case "type":
			if a.Text == nil {
				return none, errcode.New(errcode.InvalidArgument, op, "", "type needs text")
			}
			obj, err := p.target(ctx, s, t, op, a.Ref, a.Selector)
			if err != nil {
				return none, err
			}
			if _, err := cdp.Call(ctx, t, dom.Focus, dom.FocusParams{ObjectID: obj}); err != nil {
				return none, argError(ctx, op, "the element cannot take the focus: %v", err)
			}
			if _, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: *a.Text}); err != nil {
				return none, err
			}
		case "press":
			if a.Key == "" {
				return none, errcode.New(errcode.InvalidArgument, op, "", "press needs key (Enter, Tab, ArrowDown, ... or one character)")
			}
			evs, err := keyEvents(a.Key)
			if err != nil {
				return none, errcode.New(errcode.InvalidArgument, op, "", "%v", err)
			}
			if a.Ref != "" || a.Selector != "" {
				obj, err := p.target(ctx, s, t, op, a.Ref, a.Selector)
				if err != nil {
					return none, err
				}
				if _, err := cdp.Call(ctx, t, dom.Focus, dom.FocusParams{ObjectID: obj}); err != nil {
					return none, argError(ctx, op, "the element cannot take the focus: %v", err)
				}
			}
			for _, ev := range evs {
				if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, *ev); err != nil {
					return none, err
				}
			}
		case "select":
			if a.Text == nil {
				return none, errcode.New(errcode.InvalidArgument, op, "", "select needs text: the value or the label of the option")
			}
			obj, err := p.target(ctx, s, t, op, a.Ref, a.Selector)
			if err != nil {
				return none, err
			}
			found, err := callOn[bool](ctx, t, obj, true, `function(want) {
				if (!(this instanceof HTMLSelectElement)) throw new Error("the element is not a <select>");
				for (const o of this.options) {
					if (o.value === want || o.label === want || o.text === want) {
						this.value = o.value;
						this.dispatchEvent(new Event("input", {bubbles: true}));
						this.dispatchEvent(new Event("change", {bubbles: true}));
						return true;
					}
				}
				return false;
			}`, *a.Text)
			if err != nil {
				return none, argError(ctx, op, "%v", err)
			}
			if !found {
				return none, errcode.New(errcode.InvalidArgument, op, "", "the <select> has no option with value or label %q", clip.String(*a.Text, 100))
			}
		case "scroll":
			if a.Ref != "" || a.Selector != "" {
				obj, err := p.target(ctx, s, t, op, a.Ref, a.Selector)
				if err != nil {
					return none, err
				}
				_, err = cdp.Call(ctx, t, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{ObjectID: obj})
				return none, err
			}
			dy := float64(p.opts.ViewportHeight) * 0.8
			if a.DeltaY != nil {
				dy = *a.DeltaY
			}
			w, h := float64(p.opts.ViewportWidth)/2, float64(p.opts.ViewportHeight)/2
			_, err := cdp.Call(ctx, t, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseWheel, X: w, Y: h, DeltaY: dy})
			return none, err
		}
		return none, nil
	})
	if err != nil {
		return err
	}
	p.settle(ctx, s, navBefore)
	return nil
}

// settle waits for a navigation the action started (a link, a form's
// submit) to load, so the next call sees the new page: a short grace for it
// to begin, then up to NavigateTimeout for its load.
func (p *Provider) settle(ctx context.Context, s *session, navBefore int64) {
	grace := time.NewTimer(150 * time.Millisecond)
	defer grace.Stop()
	select {
	case <-grace.C:
	case <-ctx.Done():
		return
	}
	if s.navStarted.Load() == navBefore {
		return
	}
	deadline := time.Now().Add(p.opts.NavigateTimeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if s.navLoaded.Load() >= s.navStarted.Load() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LoadGrace is how long browser.goto waits for a page's load event once
// its document has been parsed (DOMContentLoaded): a page whose image or
// script never finishes is answered then, as it is, rather than failing
// at NavigateTimeout. Playwright MCP waits the same way (domcontentloaded,
// then the load event for at most 5 s).
const LoadGrace = 5 * time.Second

// errLoadGrace ends a navigation's wait LoadGrace after DOMContentLoaded.
var errLoadGrace = errors.New("no load event within the grace after DOMContentLoaded")

// navigate loads url in the tab, waits for its load event (or LoadGrace
// after DOMContentLoaded), and returns where it ended (after redirects),
// its title and the HTTP status of the document (0 for about:blank).
func (p *Provider) navigate(ctx context.Context, s *session, url string) (loc, title string, status int64, err error) {
	// The main frame's lifecycle, watched from before the navigation
	// starts: its first "init" names the new document's loader, whose
	// DOMContentLoaded starts the grace and whose response gives the
	// status if the wait ends there.
	mainFrame, _ := s.mainFrame.Load().(cdp.FrameID)
	var (
		mu        sync.Mutex
		loader    cdp.LoaderID
		docLoader cdp.LoaderID // of the last response of a document of the main frame
		docResp   *network.Response
		parsed    = make(chan struct{})
		parsedOn  sync.Once
	)
	lctx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	err = chromedp.Listen(lctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *page.EventLifecycleEvent:
			if e.FrameID != mainFrame {
				return
			}
			switch {
			case e.Name == "init" && loader == "":
				loader = e.LoaderID
			case e.Name == "DOMContentLoaded" && loader != "" && e.LoaderID == loader:
				parsedOn.Do(func() { close(parsed) })
			}
		case *network.EventResponseReceived:
			// The document's response comes before its loader's "init".
			if e.Type == network.ResourceTypeDocument && e.FrameID == mainFrame {
				docLoader, docResp = e.LoaderID, e.Response
			}
		}
	})
	if err != nil {
		return "", "", 0, err
	}
	navCtx, cancelNav := context.WithCancelCause(ctx)
	defer cancelNav(nil)
	go func() {
		select {
		case <-parsed:
		case <-navCtx.Done():
			return
		}
		t := time.NewTimer(LoadGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancelNav(errLoadGrace)
		case <-navCtx.Done():
		}
	}()
	resp, err := chromedp.Run(navCtx, chromedp.NavigateResponse(url))
	if err != nil && errors.Is(context.Cause(navCtx), errLoadGrace) && ctx.Err() == nil {
		// Parsed, not loaded: answered as it is.
		mu.Lock()
		resp, err = nil, nil
		if docLoader == loader {
			resp = docResp
		}
		mu.Unlock()
	}
	if err != nil {
		var le *chromedp.LoadError
		if errors.As(err, &le) && strings.Contains(le.ErrorText, "BLOCKED_BY_CLIENT") {
			return "", "", 0, errcode.New(errcode.InvalidArgument, "browser.goto", "", "refused %s: the network rules refused the page or a redirect of it", clip.String(url, 200))
		}
		return "", "", 0, err
	}
	if resp != nil {
		status = resp.Status
	}
	// Where it ended and its title in one evaluation (what
	// chromedp.Location and chromedp.Title read in two), in pageWorld.
	// Both are the page's to make long (a <title> of megabytes, a URL of
	// up to 2 MiB set by history.replaceState): cut in the page, and again
	// here.
	lt, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) ([]string, error) {
		world, err := isolatedWorld(ctx, t)
		if err != nil {
			return nil, err
		}
		res, err := cdp.Call(ctx, t, runtime.Evaluate, runtime.EvaluateParams{Expression: fmt.Sprintf(
			`[String(document.location).slice(0, %d), String(document.title).slice(0, %d)]`, MaxURLLen+1, MaxTextPerNode+1),
			ContextID: world, ReturnByValue: ptr(true), Silent: ptr(true)})
		if err != nil {
			return nil, err
		}
		if res.ExceptionDetails != nil || res.Result == nil {
			return nil, errors.New("the page did not answer its location and title")
		}
		var lt []string
		if err := json.Unmarshal(res.Result.Value, &lt); err != nil {
			return nil, fmt.Errorf("the page's location and title: %v", err)
		}
		return lt, nil
	})
	if err != nil {
		return "", "", 0, err
	}
	if len(lt) != 2 {
		return "", "", 0, fmt.Errorf("the page answered %d values for its location and title", len(lt))
	}
	return clip.String(lt[0], MaxURLLen), clip.String(lt[1], MaxTextPerNode), status, nil
}

// screenshot captures the viewport, or the whole page up to
// MaxScreenshotHeight, as PNG.
func (p *Provider) screenshot(ctx context.Context, fullPage bool) ([]byte, int, int, bool, error) {
	type shot struct {
		png       []byte
		w, h      int
		truncated bool
	}
	r, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (shot, error) {
		params := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng}
		out := shot{w: p.opts.ViewportWidth, h: p.opts.ViewportHeight}
		if fullPage {
			m, err := cdp.Call(ctx, t, page.GetLayoutMetrics, cdp.Empty{})
			if err != nil {
				return out, err
			}
			w, h := p.opts.ViewportWidth, p.opts.ViewportHeight
			if m.CSSContentSize != nil {
				w, h = max(w, int(m.CSSContentSize.Width)), max(h, int(m.CSSContentSize.Height))
			}
			if w > MaxScreenshotWidth {
				w, out.truncated = MaxScreenshotWidth, true
			}
			if limit := min(MaxScreenshotHeight, MaxScreenshotPixels/w); h > limit {
				h, out.truncated = limit, true
			}
			out.w, out.h = w, h
			params.CaptureBeyondViewport = ptr(true)
			params.Clip = &page.Viewport{X: 0, Y: 0, Width: float64(w), Height: float64(h), Scale: 1}
		}
		res, err := cdp.Call(ctx, t, page.CaptureScreenshot, params)
		if err != nil {
			return out, err
		}
		out.png = res.Data
		return out, nil
	})
	if err != nil {
		return nil, 0, 0, false, err
	}
	if len(r.png) > MaxScreenshotBytes {
		return nil, 0, 0, false, &errcode.Error{Code: errcode.TooLarge, Op: "browser.screenshot",
			Msg: fmt.Sprintf("the PNG is %d bytes; the limit is %d: take the viewport (fullPage false) instead", len(r.png), MaxScreenshotBytes)}
	}
	return r.png, r.w, r.h, r.truncated, nil
}

// readElement reads one element's text, outer HTML or attribute, cut in
// the page to limit UTF-16 units (at most 3 bytes of UTF-8 each, cut again
// to the byte budget by the caller; one more unit says it was longer). The
// page decides how long these are (a text of hundreds of megabytes is
// easily made), and the value crosses the DevTools pipe and is decoded in
// the daemon whole: cut after, it would cost the daemon that much memory.
func readElement(ctx context.Context, t *chromedp.Target, o runtime.RemoteObjectID, kind, attribute string, limit int) (string, error) {
	limit = max(limit, 0) + 1
	switch kind {
	case "text":
		return callOn[string](ctx, t, o, true, `function(limit) { return String(this.innerText ?? this.textContent ?? "").slice(0, limit); }`, limit)
	case "html":
		return callOn[string](ctx, t, o, true, `function(limit) { return String(this.outerHTML ?? "").slice(0, limit); }`, limit)
	case "attribute":
		return callOn[string](ctx, t, o, true, `function(limit, name) { return String(this.getAttribute(name) ?? "").slice(0, limit); }`, limit, attribute)
	}
	return "", fmt.Errorf("kind %q", kind)
}

type extractArgs struct {
	SessionID string `json:"sessionId"`
	Selector  string `json:"selector"`
	Kind      string `json:"kind"`
	Attribute string `json:"attribute,omitempty"`
}

// maxExtractNodes bounds how many elements one extract reads.
const maxExtractNodes = 1000

// link is one <a href> of an extract of kind links.
type link struct {
	Text string `json:"text"`
	Href string `json:"href"`
}

// extract reads from the elements matching a selector: their text, outer
// HTML, an attribute, or the links in them. The result is cut at
// MaxExtractBytes and says so.
func (p *Provider) extract(ctx context.Context, a extractArgs) (any, bool, error) {
	const op = "browser.extract"
	switch a.Kind {
	case "text", "html", "links":
	case "attribute":
		if a.Attribute == "" {
			return nil, false, errcode.New(errcode.InvalidArgument, op, "", "kind attribute needs attribute (its name)")
		}
	default:
		return nil, false, errcode.New(errcode.InvalidArgument, op, "", "kind %q is not one of text, html, attribute, links", clip.String(a.Kind, 20))
	}
	if a.Selector == "" {
		return nil, false, errcode.New(errcode.InvalidArgument, op, "", "selector is empty (use \"body\" for the whole page)")
	}
	budget := p.opts.MaxExtractBytes
	truncated := false
	take := func(s string) string {
		if len(s) > budget {
			truncated = true
			s = clip.String(s, max(budget, 0))
		}
		budget -= len(s)
		return s
	}
	out, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (any, error) {
		objs, err := querySelector(ctx, t, a.Selector, maxExtractNodes+1)
		if err != nil {
			return nil, argError(ctx, op, "selector %q: %v", clip.String(a.Selector, 100), err)
		}
		if len(objs) > maxExtractNodes {
			objs, truncated = objs[:maxExtractNodes], true
		}
		if a.Kind == "links" {
			var links []link
			for _, o := range objs {
				// An href longer than the whole budget is left in the page
				// (href null): it could never be given, and it is the
				// page's to make as long as it likes.
				ls, err := callOn[[]struct {
					link
					Long bool `json:"long"`
				}](ctx, t, o, true, `function(limit, budget) {
					const as = this.matches("a[href]") ? [this] : Array.from(this.querySelectorAll("a[href]"));
					return as.slice(0, limit).map(a => {
						const text = String(a.innerText || a.textContent || "").trim().slice(0, 500), href = String(a.href);
						return href.length > budget ? {text: "", href: "", long: true} : {text, href};
					});
				}`, maxExtractNodes, max(budget, 0))
				if err != nil {
					return nil, err
				}
				for _, l := range ls {
					if l.Long {
						truncated = true
						continue
					}
					// A link is given whole or not at all: a cut href
					// would be another address.
					if len(l.Text)+len(l.Href) > budget || len(links) >= maxExtractNodes {
						truncated = true
						return links, nil
					}
					budget -= len(l.Text) + len(l.Href)
					links = append(links, l.link)
				}
			}
			if links == nil {
				links = []link{}
			}
			return links, nil
		}
		var parts []string
		for _, o := range objs {
			if budget <= 0 {
				truncated = true
				break
			}
			v, err := readElement(ctx, t, o, a.Kind, a.Attribute, budget)
			if err != nil {
				return nil, err
			}
			parts = append(parts, take(v))
		}
		if parts == nil {
			parts = []string{}
		}
		return parts, nil
	})
	return out, truncated, err
}

package browser

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// hostileSite serves pages that open JavaScript dialogs or never stop
// running a script.
func hostileSite(t *testing.T) *httptest.Server {
	t.Helper()
	pages := map[string]string{
		"/alert":      `<title>Alert</title><p id="r">before</p><script>alert("hello from the page"); document.getElementById("r").textContent = "after";</script>`,
		"/confirm":    `<title>Confirm</title><p id="r">before</p><script>document.getElementById("r").textContent = "confirm=" + confirm("Sure?");</script>`,
		"/prompt":     `<title>Prompt</title><p id="r">before</p><script>document.getElementById("r").textContent = "prompt=" + prompt("Name?", "x");</script>`,
		"/click":      `<title>Click</title><p id="r">before</p><button id="b" onclick="alert('clicked'); document.getElementById('r').textContent = 'after';">Go</button>`,
		"/leave":      `<title>Leave</title><input id="i"><script>addEventListener("beforeunload", e => { e.preventDefault(); e.returnValue = "stay"; });</script>`,
		"/flood":      `<title>Flood</title><script>for (let i = 0; i < 60; i++) alert(i + " " + "x".repeat(5000));</script><p id="r">done</p>`,
		"/endless":    `<title>Endless</title><script>for (;;) alert("again");</script><p id="r">done</p>`,
		"/spin":       `<title>Spin</title><p id="r">before</p><button id="b" onclick="for (;;) {}">Spin</button>`,
		"/spin-load":  `<title>SpinLoad</title><script>for (;;) {}</script><p id="r">after the loop</p>`,
		"/spin-again": `<title>SpinAgain</title><button id="b" onclick="setInterval(() => { for (;;) {} }, 0); for (;;) {}">Spin</button>`,
		"/other":      `<title>Other</title><p id="r">other</p>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "<!doctype html>"+body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func hostileSetup(t *testing.T, mod func(*Options)) *fixture {
	t.Helper()
	needBrowser(t)
	srv := hostileSite(t)
	f := setup(t, func(o *Options) {
		o.Net = allowing(t, srv.URL)
		if mod != nil {
			mod(o)
		}
	})
	f.srv = srv
	return f
}

// dialogsOf decodes a result's dialogs.
func dialogsOf(t *testing.T, out map[string]any) []dialogRecord {
	t.Helper()
	b, _ := json.Marshal(out["dialogs"])
	var ds []dialogRecord
	if out["dialogs"] != nil {
		if err := json.Unmarshal(b, &ds); err != nil {
			t.Fatalf("dialogs %s: %v", b, err)
		}
	}
	return ds
}

func (f *fixture) text(t *testing.T, id, selector string) string {
	t.Helper()
	return fmt.Sprint(f.must(t, "browser.extract", fmt.Sprintf(`{"sessionId":%q,"selector":%q,"kind":"text"}`, id, selector))["content"])
}

// TestDialogsDismissed: a page's alert, confirm and prompt on load do not
// hold browser.goto for its timeout: each is answered (alert accepted,
// confirm and prompt dismissed) and reported in the result of the call
// that was running, and the session works on. A dialog opened by a click
// is reported by browser.act; a beforeunload dialog does not stop the
// next browser.goto.
func TestDialogsDismissed(t *testing.T) {
	f := hostileSetup(t, nil)
	id := f.start(t)
	for _, tc := range []struct {
		path, typ, message, result string
		accepted                   bool
	}{
		{"/alert", "alert", "hello from the page", "[after]", true},
		{"/confirm", "confirm", "Sure?", "[confirm=false]", false},
		{"/prompt", "prompt", "Name?", "[prompt=null]", false},
	} {
		t0 := time.Now()
		text, isErr, code := f.call(t, "browser.goto", fmt.Sprintf(`{"sessionId":%q,"url":%q}`, id, f.srv.URL+tc.path))
		// The call's own limit is 30 s; a dialog left open holds it that long.
		if took := time.Since(t0); isErr || took > 10*time.Second {
			t.Fatalf("goto %s: %s (%s) after %s", tc.path, text, code, took)
		}
		var out map[string]any
		json.Unmarshal([]byte(text), &out)
		want := []dialogRecord{{Type: tc.typ, Message: tc.message, Accepted: tc.accepted}}
		if ds := dialogsOf(t, out); fmt.Sprint(ds) != fmt.Sprint(want) || out["untrusted"] != untrustedNote {
			t.Errorf("goto %s: dialogs %+v, want %+v: %s", tc.path, ds, want, text)
		}
		// The page went on after the answer, and the next call works and
		// reports no dialog again.
		out = f.must(t, "browser.extract", fmt.Sprintf(`{"sessionId":%q,"selector":"#r","kind":"text"}`, id))
		if got := fmt.Sprint(out["content"]); got != tc.result || out["dialogs"] != nil {
			t.Errorf("%s: after the dialog: %v", tc.path, out)
		}
	}

	f.gotoPage(t, id, "/click")
	out := f.must(t, "browser.act", fmt.Sprintf(`{"sessionId":%q,"type":"click","selector":"#b"}`, id))
	if ds := dialogsOf(t, out); len(ds) != 1 || ds[0].Type != "alert" || ds[0].Message != "clicked" {
		t.Errorf("act: %v", out)
	}
	if got := f.text(t, id, "#r"); got != "[after]" {
		t.Errorf("after the click's alert: %s", got)
	}

	// Chromium asks beforeunload only of a page the user interacted with.
	f.gotoPage(t, id, "/leave")
	f.must(t, "browser.act", fmt.Sprintf(`{"sessionId":%q,"type":"click","selector":"#i"}`, id))
	f.must(t, "browser.act", fmt.Sprintf(`{"sessionId":%q,"type":"type","selector":"#i","text":"unsaved"}`, id))
	t0 := time.Now()
	out = f.gotoPage(t, id, "/other")
	if took := time.Since(t0); out["title"] != "Other" || took > 10*time.Second {
		t.Errorf("goto away from a page with a beforeunload handler: %v after %s", out, took)
	}
	if ds := dialogsOf(t, out); len(ds) != 1 || ds[0].Type != "beforeunload" || !ds[0].Accepted {
		t.Errorf("beforeunload: %v", out)
	}
}

// TestDialogFlood: a page that opens dialogs by the dozen gets a bounded
// report (MaxDialogs records, each message cut, the rest counted), and one
// that never stops opening them is left for about:blank, so the call
// returns well before its limit, and the session works on.
func TestDialogFlood(t *testing.T) {
	f := hostileSetup(t, nil)
	id := f.start(t)
	out := f.gotoPage(t, id, "/flood")
	ds := dialogsOf(t, out)
	if len(ds) != MaxDialogs || out["dialogsOmitted"] != float64(60-MaxDialogs) {
		t.Errorf("flood: %d dialogs, %v omitted; want %d and %d", len(ds), out["dialogsOmitted"], MaxDialogs, 60-MaxDialogs)
	}
	for i, d := range ds {
		if !strings.HasPrefix(d.Message, fmt.Sprintf("%d xxx", i)) || len(d.Message) > MaxTextPerNode+len("…") {
			t.Errorf("dialog %d: %d bytes: %.40q…", i, len(d.Message), d.Message)
		}
	}
	if got := f.text(t, id, "#r"); got != "[done]" {
		t.Errorf("after the flood: %s", got)
	}

	t0 := time.Now()
	out = f.gotoPage(t, id, "/endless")
	took := time.Since(t0)
	t.Logf("goto of a page opening dialogs without end: %s", took)
	// The call's own limit is 30 s.
	if took > 15*time.Second {
		t.Errorf("goto of a page opening dialogs without end took %s", took)
	}
	if ds := dialogsOf(t, out); len(ds) != MaxDialogs || out["dialogsOmitted"].(float64) < maxDialogsBeforeLeave-MaxDialogs ||
		!strings.Contains(fmt.Sprint(out["dialogsLeft"]), "about:blank") {
		t.Errorf("endless dialogs: %d dialogs, %v omitted, %v", len(ds), out["dialogsOmitted"], out["dialogsLeft"])
	}
	if got := f.gotoPage(t, id, "/other"); got["title"] != "Other" || got["dialogs"] != nil {
		t.Errorf("the next page: %v", got)
	}
}

// TestCloseWhileBusy: browser.close (and the provider's Close) ends a
// session whose page runs a script that never stops, without waiting for
// the stuck action: the action fails saying the session was closed, and no
// process of the session is left.
func TestCloseWhileBusy(t *testing.T) {
	for _, how := range []string{"browser.close", "Provider.Close"} {
		t.Run(how, func(t *testing.T) {
			f := hostileSetup(t, nil)
			id := f.start(t)
			f.gotoPage(t, id, "/spin")
			f.p.mu.Lock()
			dir := f.p.sessions[id].dir
			f.p.mu.Unlock()
			stuck := make(chan string, 1)
			go func() {
				text, isErr, _ := f.call(t, "browser.act", fmt.Sprintf(`{"sessionId":%q,"type":"click","selector":"#b"}`, id))
				if !isErr {
					text = "no error: " + text
				}
				stuck <- text
			}()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if h := f.p.Health(); len(h.Sessions) == 1 && h.Sessions[0].Busy {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the click never started")
				}
			}
			time.Sleep(time.Second) // the click reaches the page, which spins
			t0 := time.Now()
			if how == "browser.close" {
				f.must(t, "browser.close", fmt.Sprintf(`{"sessionId":%q}`, id))
			} else {
				f.p.Close()
			}
			// The action's own limit is 30 s; close waiting for it takes that.
			if took := time.Since(t0); took > 15*time.Second {
				t.Errorf("%s took %s", how, took)
			}
			select {
			case text := <-stuck:
				if !strings.Contains(text, "the session was closed") {
					t.Errorf("the stuck action: %s", text)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the stuck action did not return after close")
			}
			if pids := processesUsing(dir, false); len(pids) != 0 {
				t.Errorf("processes left: %v", pids)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s left: %v", dir, err)
			}
		})
	}
}

// TestBusyPage: a script that never stops holds a call for its limit
// only once. At the limit the script is stopped (Runtime.terminateExecution)
// and the page works on; a page that starts spinning again at once is left
// for about:blank. Either way the next call does not wait.
func TestBusyPage(t *testing.T) {
	const limit = 6 * time.Second
	f := hostileSetup(t, func(o *Options) { o.NavigateTimeout = limit })
	id := f.start(t)
	text, isErr, code := f.call(t, "browser.goto", fmt.Sprintf(`{"sessionId":%q,"url":%q}`, id, f.srv.URL+"/spin-load"))
	if !isErr || code != errcode.Timeout || !strings.Contains(text, "the script was stopped") {
		t.Errorf("goto of a page that spins: %s (%s)", text, code)
	}
	t0 := time.Now()
	if got := f.text(t, id, "#r"); got != "[after the loop]" {
		t.Errorf("after the stopped script: %s", got)
	}
	if took := time.Since(t0); took > limit/2 {
		t.Errorf("the call after the stopped script took %s", took)
	}

	f.gotoPage(t, id, "/spin-again")
	text, isErr, code = f.call(t, "browser.act", fmt.Sprintf(`{"sessionId":%q,"type":"click","selector":"#b"}`, id))
	if !isErr || code != errcode.Timeout || !strings.Contains(text, "the tab was sent to about:blank") {
		t.Errorf("a click that spins again and again: %s (%s)", text, code)
	}
	t0 = time.Now()
	tree := f.must(t, "browser.snapshot", fmt.Sprintf(`{"sessionId":%q}`, id))["tree"].(string)
	if took := time.Since(t0); strings.Contains(tree, "Spin") || took > limit/2 {
		t.Errorf("the next call after the page was left: %q after %s", tree, took)
	}
	if got := f.gotoPage(t, id, "/other"); got["title"] != "Other" {
		t.Errorf("the next page: %v", got)
	}
}

package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// needBrowser skips a test when no Chromium is installed (in CI, which
// installs it, it fails instead: internal/testenv).
func needBrowser(t testing.TB) {
	t.Helper()
	testenv.Command(t, "chromium", "chromium", "chromium-browser", "google-chrome")
}

// site is the test's web site: a home page with a button, an input, a
// form and links; a search result page; a tall page; cookie pages.
func site() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `<!doctype html><html><head><title>Home</title></head><body>
<h1>Welcome</h1>
<p id="out">not clicked</p>
<button id="b" onclick="document.getElementById('out').textContent='clicked'">Press me</button>
<label>Name <input id="name" type="text"></label>
<form action="/search" method="get"><input id="q" name="q" type="search" aria-label="Query"></form>
<select id="color"><option value="r">Red</option><option value="g">Green</option></select>
<a href="/other">Other page</a> <a href="https://example.com/x">Example</a>
</body></html>`)
	})
	mux.HandleFunc("/search", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>Results</title><p id="res">You searched: %s</p>`, html(r.URL.Query().Get("q")))
	})
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Other</title><p>Other page</p><a href="/">Home</a>`)
	})
	mux.HandleFunc("/tall", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Tall</title><style>body{margin:0}</style><div style="height:3000px;background:#eee">tall</div>`)
	})
	mux.HandleFunc("/cookie-set", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "who", Value: "first", Path: "/"})
		fmt.Fprint(w, `<!doctype html><title>Set</title><p>set</p>`)
	})
	mux.HandleFunc("/cookie-show", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>Show</title><p id="c">cookie=[%s]</p>`, html(r.Header.Get("Cookie")))
	})
	mux.HandleFunc("/hog", func(w http.ResponseWriter, r *http.Request) {
		// A page that allocates without end once its button is pressed.
		io.WriteString(w, `<!doctype html><title>Hog</title><button id="hog" onclick="
			const keep = []; for (;;) keep.push(new Array(1 << 20).fill(Math.random()));">Allocate</button>`)
	})
	mux.HandleFunc("/labelled", func(w http.ResponseWriter, r *http.Request) {
		w.Write(labelledPage())
	})
	return mux
}

// labelledPage is a hostile page: 1 MB of hidden text that 20 buttons
// name as their label, so that each button's accessible name is all of it
// and the accessibility tree of the page is 20 MB. It is made once, before
// a test measures the daemon's allocations.
var labelledPage = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	b.WriteString(`<!doctype html><title>Labelled</title><div id="l" hidden>`)
	b.WriteString(strings.Repeat("word ", 200_000))
	b.WriteString(`</div>`)
	for i := range 20 {
		fmt.Fprintf(&b, `<button aria-labelledby="l">%d</button>`, i)
	}
	return b.Bytes()
})

func html(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

type fixture struct {
	p   *Provider
	reg *registry.Registry
	srv *httptest.Server
}

// setup starts the site on 127.0.0.1 and a provider whose network rules
// admit exactly that address and port (and http), as the gateway tools' tests do.
func setup(t testing.TB, mod func(*Options)) *fixture {
	t.Helper()
	needBrowser(t)
	srv := httptest.NewServer(site())
	t.Cleanup(srv.Close)
	// The sessions' directories are under /tmp, which Chromium (nobody, when
	// the test is root) can search whatever TMPDIR is.
	opts := Options{Net: allowing(t, srv.URL), AllowHTTP: true, ViewportWidth: 800, ViewportHeight: 600, TempDir: testenv.SharedTempDir(t)}
	if mod != nil {
		mod(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	reg := registry.New(registry.Options{MaxConcurrent: 20})
	if err := reg.Set("browser", p.Tools()); err != nil {
		t.Fatal(err)
	}
	return &fixture{p: p, reg: reg, srv: srv}
}

// allowing is a netguard client admitting the loopback address and port of
// these servers' URLs.
func allowing(t testing.TB, urls ...string) *netguard.Client {
	var prefixes []netip.Prefix
	var ports []uint16
	for _, s := range urls {
		u, _ := url.Parse(s)
		port, _ := strconv.Atoi(u.Port())
		ports = append(ports, uint16(port))
		prefixes = append(prefixes, netip.PrefixFrom(netip.MustParseAddr(u.Hostname()), 32))
	}
	c := netguard.New(netguard.Options{AllowPrefixes: prefixes, AllowPorts: ports})
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// call calls a tool; it returns the result's JSON text (the last text
// content), whether it is an error, and its code.
func (f *fixture) call(t testing.TB, tool, args string) (string, bool, errcode.Code) {
	t.Helper()
	res, err := f.reg.Call(context.Background(), tool, registry.Call{Args: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	return text, res.IsError, registry.Code(res)
}

// must calls a tool that must succeed and decodes its result.
func (f *fixture) must(t testing.TB, tool, args string) map[string]any {
	t.Helper()
	text, isErr, code := f.call(t, tool, args)
	if isErr {
		t.Fatalf("%s %s: %s (%s)", tool, args, text, code)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("%s: %v: %s", tool, err, text)
	}
	return out
}

// session is the provider's session of id (nil if there is none).
func (f *fixture) session(id string) *session {
	f.p.mu.Lock()
	defer f.p.mu.Unlock()
	return f.p.sessions[id]
}

func (f *fixture) start(t testing.TB) string {
	t.Helper()
	id, _ := f.must(t, "browser.start", `{}`)["sessionId"].(string)
	if len(id) != 32 {
		t.Fatalf("sessionId %q", id)
	}
	return id
}

func (f *fixture) gotoPage(t testing.TB, id, path string) map[string]any {
	t.Helper()
	return f.must(t, "browser.goto", fmt.Sprintf(`{"sessionId":%q,"url":%q}`, id, f.srv.URL+path))
}

// refOf finds the ref of the first snapshot line holding all of want.
func refOf(t testing.TB, tree string, want ...string) string {
	t.Helper()
lines:
	for _, line := range strings.Split(tree, "\n") {
		for _, w := range want {
			if !strings.Contains(line, w) {
				continue lines
			}
		}
		i := strings.Index(line, "[ref=")
		if i < 0 {
			continue
		}
		return line[i+5 : i+strings.Index(line[i:], "]")]
	}
	t.Fatalf("no line with %q and a ref in:\n%s", want, tree)
	return ""
}

func TestStartGotoSnapshot(t *testing.T) {
	f := setup(t, nil)
	id := f.start(t)
	out := f.gotoPage(t, id, "/")
	if out["success"] != true || out["title"] != "Home" || out["url"] != f.srv.URL+"/" || out["status"] != 200.0 || out["untrusted"] != untrustedNote {
		t.Fatalf("goto: %v", out)
	}
	if snap, _ := out["snapshot"].(string); !strings.Contains(snap, `- heading "Welcome"`) {
		t.Errorf("goto's snapshot has no heading:\n%s", snap)
	}
	tree := f.must(t, "browser.snapshot", `{"sessionId":"`+id+`","mode":"aria"}`)["tree"].(string)
	for _, want := range []string{`- heading "Welcome"`, `- button "Press me" [ref=e`, `- textbox "Name" [ref=e`, `- searchbox "Query" [ref=e`,
		`- link "Other page" [ref=e`, `- combobox`, `- text "not clicked"`} {
		if !strings.Contains(tree, want) {
			t.Errorf("aria snapshot lacks %q:\n%s", want, tree)
		}
	}
	// The same node keeps its ref across snapshots of one page.
	again := f.must(t, "browser.snapshot", `{"sessionId":"`+id+`","interactiveOnly":true}`)["tree"].(string)
	if refOf(t, tree, "Press me") != refOf(t, again, "Press me") {
		t.Errorf("the button's ref changed:\n%s\n%s", tree, again)
	}
	if strings.Contains(again, "heading") || strings.Contains(again, "  -") {
		t.Errorf("interactiveOnly shows other nodes or indents:\n%s", again)
	}
	dom := f.must(t, "browser.snapshot", `{"sessionId":"`+id+`","mode":"dom"}`)["tree"].(string)
	for _, want := range []string{`button id="b" [ref=e`, `input id="name" type="text" [ref=e`, `a href="/other" [ref=e`, `"Welcome"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("dom snapshot lacks %q:\n%s", want, dom)
		}
	}
	if out := f.gotoPage(t, id, "/missing"); out["status"] != 404.0 {
		t.Errorf("goto of a missing page: %v", out)
	}
}

func TestActClickTypePressSelect(t *testing.T) {
	f := setup(t, nil)
	id := f.start(t)
	tree := f.gotoPage(t, id, "/")["snapshot"].(string)
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"click","ref":"`+refOf(t, tree, "button", "Press me")+`"}`)
	if got := f.must(t, "browser.extract", `{"sessionId":"`+id+`","selector":"#out","kind":"text"}`)["content"]; fmt.Sprint(got) != "[clicked]" {
		t.Errorf("after the click: %v", got)
	}
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"type","ref":"`+refOf(t, tree, "textbox", "Name")+`","text":"Ada \"<x>\""}`)
	if got := f.must(t, "browser.extract", `{"sessionId":"`+id+`","selector":"#name","kind":"attribute","attribute":"id"}`)["content"]; fmt.Sprint(got) != "[name]" {
		t.Errorf("attribute: %v", got)
	}
	tree = f.must(t, "browser.snapshot", `{"sessionId":"`+id+`"}`)["tree"].(string)
	if !strings.Contains(tree, `value="Ada \"<x>\""`) {
		t.Errorf("typed text not in the snapshot:\n%s", tree)
	}
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"select","selector":"#color","text":"Green"}`)
	if got := f.must(t, "browser.extract", `{"sessionId":"`+id+`","selector":"#color","kind":"html"}`)["content"]; !strings.Contains(fmt.Sprint(got), "select") {
		t.Errorf("html: %v", got)
	}
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"type","selector":"#q","text":"cats & dogs"}`)
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"press","selector":"#q","key":"Enter"}`)
	if got := f.must(t, "browser.extract", `{"sessionId":"`+id+`","selector":"#res","kind":"text"}`)["content"]; fmt.Sprint(got) != "[You searched: cats & dogs]" {
		t.Errorf("after Enter: %v", got)
	}
}

// TestNavigationRefused: goto refuses what the rules refuse, before the
// browser is asked: other schemes, private and metadata addresses, http
// without the operator's flag.
func TestNavigationRefused(t *testing.T) {
	f := setup(t, nil)
	id := f.start(t)
	for _, tc := range []struct{ url, want string }{
		{"file:///etc/passwd", `scheme "file" is not allowed`},
		{"data:text/html,<p>x</p>", `scheme "data" is not allowed`},
		{"chrome://settings", `scheme "chrome" is not allowed`},
		{"view-source:https://example.com/", `scheme "view-source" is not allowed`},
		{"about:config", `scheme "about" is not allowed`},
		{"javascript:alert(1)", `scheme "javascript" is not allowed`},
		{"http://10.0.0.1/", "refused"},
		{"http://192.168.1.1/", "refused"},
		{"http://169.254.169.254/latest/meta-data/", "refused"},
		{"http://localhost/", "refused"},
		{"http://[::1]/", "refused"},
		{"http://0x7f.1/", "refused"},
		{strings.Replace(f.srv.URL, "127.0.0.1", "127.0.0.2", 1) + "/", "refused"},
	} {
		text, isErr, code := f.call(t, "browser.goto", fmt.Sprintf(`{"sessionId":%q,"url":%q}`, id, tc.url))
		if !isErr || code != errcode.InvalidArgument || !strings.Contains(text, tc.want) {
			t.Errorf("%s: %s (%s); want %q", tc.url, text, code, tc.want)
		}
	}
	if out := f.must(t, "browser.goto", `{"sessionId":"`+id+`","url":"about:blank"}`); out["url"] != "about:blank" {
		t.Errorf("about:blank: %v", out)
	}
	strict := setup(t, func(o *Options) { o.AllowHTTP = false })
	sid := strict.start(t)
	if text, isErr, _ := strict.call(t, "browser.goto", `{"sessionId":"`+sid+`","url":"http://example.com/"}`); !isErr || !strings.Contains(text, "only https") {
		t.Errorf("http without AllowHTTP: %s", text)
	}
	// A page of this machine (the test's own server, admitted by the
	// door's prefix but not over http) is refused naming the one flag
	// that admits it, not the first rule it breaks.
	if text, isErr, _ := strict.call(t, "browser.goto", `{"sessionId":"`+sid+`","url":"`+strict.srv.URL+`/"}`); !isErr || !strings.Contains(text, LocalRefusal) {
		t.Errorf("a loopback page over http without AllowHTTP or AllowLocal: %s", text)
	}
}

// listenOn serves h on addr (another loopback address than the allowed
// one) and counts the requests it gets.
func listenOn(t *testing.T, addr string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "image/gif")
		w.Write([]byte("GIF89a"))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestSubresourcesChecked: a page whose images, fetch and WebSocket point
// at the metadata address and at a loopback server the rules do not admit
// loads, and that server never gets a request: interception failed the
// requests, the proxy the WebSocket (which interception does not see). A
// redirect of the page to it is refused too.
func TestSubresourcesChecked(t *testing.T) {
	needBrowser(t)
	other, hits := listenOn(t, "127.0.0.2:0")
	mux := http.NewServeMux()
	mux.HandleFunc("/leak", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>Leak</title>
<img src="http://169.254.169.254/latest/meta-data/iam">
<img src="%s/pixel.gif">
<script>fetch(%q).catch(() => {}); new Image().src = %q; try { new WebSocket(%q); } catch (e) {}</script>`,
			other.URL, other.URL+"/fetched", other.URL+"/img2", strings.Replace(other.URL, "http:", "ws:", 1)+"/socket")
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/redirected", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// The rules admit the page's server and other's port, not its address.
	f := setup(t, func(o *Options) {
		o.Net = allowing(t, srv.URL, strings.Replace(other.URL, "127.0.0.2", "127.0.0.1", 1))
	})
	f.srv = srv
	id := f.start(t)
	if out := f.gotoPage(t, id, "/leak"); out["title"] != "Leak" {
		t.Fatalf("leak page: %v", out)
	}
	time.Sleep(500 * time.Millisecond) // the page's script runs after load
	text, isErr, _ := f.call(t, "browser.goto", `{"sessionId":"`+id+`","url":"`+srv.URL+`/redirect"}`)
	if !isErr || !strings.Contains(text, "refused") {
		t.Errorf("redirect to a refused address: %s", text)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the refused server got %d requests", n)
	}
	if h := f.p.Health(); len(h.Sessions) != 1 || h.Sessions[0].Blocked < 4 {
		t.Errorf("health: %+v", h)
	}
}

// TestWebRTCSendsNoUDP: a page's RTCPeerConnection with STUN and TURN
// servers on loopback sends them nothing. WebRTC's UDP is not a request of
// the network stack: neither interception nor the proxy sees it, so only
// Chromium's IP handling policy (disable_non_proxied_udp) holds it.
func TestWebRTCSendsNoUDP(t *testing.T) {
	needBrowser(t)
	uc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uc.Close() })
	var packets atomic.Int64
	go func() {
		b := make([]byte, 2048)
		for {
			if _, _, err := uc.ReadFrom(b); err != nil {
				return
			}
			packets.Add(1)
		}
	}()
	port := uc.LocalAddr().(*net.UDPAddr).Port
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>RTC</title><script>
const pc = new RTCPeerConnection({iceServers: [{urls: "stun:127.0.0.1:%[1]d"},
	{urls: "turn:127.0.0.1:%[1]d?transport=udp", username: "u", credential: "p"}]});
pc.createDataChannel("x");
pc.createOffer().then(o => pc.setLocalDescription(o));
</script>`, port)
	}))
	t.Cleanup(srv.Close)
	f := setup(t, func(o *Options) { o.Net = allowing(t, srv.URL) })
	f.srv = srv
	id := f.start(t)
	if out := f.gotoPage(t, id, "/rtc"); out["title"] != "RTC" {
		t.Fatalf("rtc page: %v", out)
	}
	time.Sleep(2 * time.Second) // ICE gathering sends its binding requests at once
	if n := packets.Load(); n != 0 {
		t.Errorf("the page's WebRTC sent %d UDP packets to a loopback port", n)
	}
}

// TestStaleRef: a ref of a page the tab has navigated away from is refused
// as stale; a ref never given, or not a ref, is refused as such.
func TestStaleRef(t *testing.T) {
	f := setup(t, nil)
	id := f.start(t)
	tree := f.gotoPage(t, id, "/")["snapshot"].(string)
	ref := refOf(t, tree, "link", "Other page")
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"click","ref":"`+ref+`"}`)
	if got := f.must(t, "browser.extract", `{"sessionId":"`+id+`","selector":"p","kind":"text"}`)["content"]; fmt.Sprint(got) != "[Other page]" {
		t.Fatalf("the link's click did not navigate: %v", got)
	}
	for _, tc := range []struct{ ref, want string }{
		{ref, "is stale"},
		{"e99999", "was not given by any snapshot"},
		{`e1"]); alert(1); //`, "is not a ref"},
		{"x", "is not a ref"},
	} {
		text, isErr, code := f.call(t, "browser.act", fmt.Sprintf(`{"sessionId":%q,"type":"click","ref":%q}`, id, tc.ref))
		if !isErr || code != errcode.InvalidArgument || !strings.Contains(text, tc.want) {
			t.Errorf("ref %q: %s (%s); want %q", tc.ref, text, code, tc.want)
		}
	}
}

// TestHostileArguments: every argument a client controls is checked, and a
// selector is data: quotes and script in it select nothing and run nothing.
func TestHostileArguments(t *testing.T) {
	f := setup(t, nil)
	id := f.start(t)
	f.gotoPage(t, id, "/")
	for _, tc := range []struct{ tool, args, want string }{
		{"browser.act", `{"sessionId":"` + id + `","type":"click","selector":"#b'); document.title='pwned'; ('"}`, "selector"},
		{"browser.act", `{"sessionId":"` + id + `","type":"click","selector":"#nothing-here"}`, "matched no element"},
		{"browser.act", `{"sessionId":"` + id + `","type":"click","selector":"` + strings.Repeat("a", MaxSelectorLen+1) + `"}`, "the limit is 1000"},
		{"browser.act", `{"sessionId":"` + id + `","type":"press","key":"NotAKey"}`, `key "NotAKey" is not a key name`},
		{"browser.act", `{"sessionId":"` + id + `","type":"drag","selector":"#b"}`, `type "drag" is not one of`},
		{"browser.act", `{"sessionId":"` + id + `","type":"click"}`, "give ref"},
		{"browser.act", `{"sessionId":"` + id + `","type":"click","ref":"e1","selector":"#b"}`, "not both"},
		{"browser.act", `{"sessionId":"` + id + `","type":"select","selector":"#b","text":"x"}`, "not a <select>"},
		{"browser.act", `{"sessionId":"` + id + `","type":"type","selector":"#name","text":"` + strings.Repeat("x", MaxTypeChars+1) + `"}`, "the limit is 10000"},
		{"browser.act", `{"sessionId":"` + id + `","type":"type","selector":"#name"}`, "type needs text"},
		{"browser.act", `{"sessionId":"` + id + `","type":"press"}`, "press needs key"},
		{"browser.act", `{"sessionId":"` + id + `","type":"select","selector":"#color"}`, "select needs text"},
		{"browser.act", `{"sessionId":"` + id + `","type":"select","selector":"#color","text":"Purple"}`, `the <select> has no option with value or label "Purple"`},
		{"browser.extract", `{"sessionId":"` + id + `","selector":"","kind":"text"}`, "selector is empty"},
		{"browser.goto", `{"sessionId":"` + id + `","url":"https://%zz/"}`, "invalid URL escape"},
		{"browser.close", `{"sessionId":"nope"}`, "no such browser session"},
		{"browser.extract", `{"sessionId":"` + id + `","selector":"p","kind":"secrets"}`, `kind "secrets" is not one of`},
		{"browser.extract", `{"sessionId":"` + id + `","selector":"p","kind":"attribute"}`, "needs attribute"},
		{"browser.snapshot", `{"sessionId":"` + id + `","mode":"xml"}`, `mode "xml"`},
		{"browser.snapshot", `{"sessionId":"nope"}`, "no such browser session"},
		{"browser.snapshot", `{"sessionId":""}`, "sessionId is empty"},
		{"browser.goto", `{"sessionId":"` + id + `","url":"https://` + strings.Repeat("a", MaxURLLen) + `"}`, "the limit is 8192"},
		{"browser.start", `{"sessionKey":"` + strings.Repeat("k", 129) + `"}`, "the limit is 128"},
		{"browser.start", `{"profile":"/etc"}`, "unknown field"},
	} {
		text, isErr, _ := f.call(t, tc.tool, tc.args)
		if !isErr || !strings.Contains(text, tc.want) {
			t.Errorf("%s %.120s: %s; want %q", tc.tool, tc.args, text, tc.want)
		}
	}
	if got := f.must(t, "browser.extract", `{"sessionId":"`+id+`","selector":"title","kind":"text"}`)["content"]; fmt.Sprint(got) != "[Home]" {
		t.Errorf("a selector ran as script: the title is %v", got)
	}
}

// TestExtractCutInThePage: the page decides how long an element's text,
// HTML, attributes and links are; what crosses the DevTools pipe to the
// daemon is cut in the page to the budget, not after the daemon has
// decoded the whole value.
func TestExtractCutInThePage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Big</title><div id=big></div><script>
const big = "x".repeat(4 << 20), d = document.getElementById("big");
d.textContent = big;
d.setAttribute("data-big", big);
const a = document.createElement("a"); a.href = "/" + big; a.textContent = "long"; d.after(a);
const b = document.createElement("a"); b.href = "/short"; b.textContent = "short"; a.after(b);
</script>`)
	}))
	t.Cleanup(srv.Close)
	f := setup(t, func(o *Options) { o.MaxExtractBytes, o.Net = 1000, allowing(t, srv.URL) })
	f.srv = srv
	id := f.start(t)
	f.gotoPage(t, id, "/")
	s := f.session(id)
	ctx, cancel := callCtx(s, context.Background(), 30*time.Second)
	defer cancel()
	for _, kind := range []string{"text", "html", "attribute"} {
		v, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (string, error) {
			objs, err := querySelector(ctx, t, "#big", 1)
			if err != nil || len(objs) != 1 {
				return "", fmt.Errorf("#big: %v %v", objs, err)
			}
			return readElement(ctx, t, objs[0], kind, "data-big", 1000)
		})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if len(v) > 3*1001 {
			t.Errorf("%s: %d bytes crossed from the page for a budget of 1000", kind, len(v))
		}
	}
	out := f.must(t, "browser.extract", `{"sessionId":"`+id+`","selector":"body","kind":"links"}`)
	if links, _ := json.Marshal(out["content"]); !strings.Contains(string(links), "/short") || len(links) > 1000 || out["truncated"] != true {
		t.Errorf("links: %.300s truncated=%v", links, out["truncated"])
	}
}

func TestExtractAndScreenshot(t *testing.T) {
	f := setup(t, func(o *Options) { o.MaxExtractBytes = 40 })
	id := f.start(t)
	f.gotoPage(t, id, "/")
	out := f.must(t, "browser.extract", `{"sessionId":"`+id+`","selector":"body","kind":"links"}`)
	links, _ := json.Marshal(out["content"])
	if want := `[{"href":"` + f.srv.URL + `/other","text":"Other page"}]`; string(links) != want || out["untrusted"] != untrustedNote {
		t.Errorf("links: %s; want %s (the second link does not fit whole)", links, want)
	}
	if out["truncated"] != true {
		t.Errorf("links past the 40-byte cap are not marked truncated: %v", out)
	}
	if out := f.must(t, "browser.extract", `{"sessionId":"`+id+`","selector":"body","kind":"text"}`); out["truncated"] != true || len(fmt.Sprint(out["content"])) > 50 {
		t.Errorf("text over the cap: %v", out)
	}

	f.gotoPage(t, id, "/tall")
	for _, tc := range []struct {
		full bool
		w, h int
	}{{true, 800, 3000}, {false, 800, 600}} {
		res, err := f.reg.Call(context.Background(), "browser.screenshot", registry.Call{Args: json.RawMessage(fmt.Sprintf(`{"sessionId":%q,"fullPage":%v}`, id, tc.full))})
		if err != nil || res.IsError {
			t.Fatalf("screenshot: %v %v", err, res.Content)
		}
		img, ok := res.Content[0].(*mcp.ImageContent)
		if !ok || img.MIMEType != "image/png" {
			t.Fatalf("screenshot content: %#v", res.Content[0])
		}
		cfg, err := png.DecodeConfig(bytes.NewReader(img.Data))
		if err != nil || cfg.Width != tc.w || cfg.Height != tc.h {
			t.Errorf("fullPage=%v: %dx%d, %v; want %dx%d", tc.full, cfg.Width, cfg.Height, err, tc.w, tc.h)
		}
	}
}

// TestSessions: sessions are isolated (a cookie of one is not sent by
// another), a sessionKey finds its live session again, the cap holds,
// close removes the profile directory, and an idle session is closed.
func TestSessions(t *testing.T) {
	f := setup(t, func(o *Options) { o.MaxSessions = 2 })
	a := f.must(t, "browser.start", `{"sessionKey":"agent-a"}`)["sessionId"].(string)
	if again := f.must(t, "browser.start", `{"sessionKey":"agent-a"}`); again["sessionId"] != a || again["reused"] != true {
		t.Errorf("the same key: %v", again)
	}
	b := f.start(t)
	if text, isErr, _ := f.call(t, "browser.start", `{}`); !isErr || !strings.Contains(text, "the limit (--browser-max-sessions)") {
		t.Errorf("over the cap: %s", text)
	}
	f.gotoPage(t, a, "/cookie-set")
	if got := f.must(t, "browser.extract", `{"sessionId":"`+a+`","selector":"#c","kind":"text"}`); fmt.Sprint(got["content"]) != "[]" {
		t.Errorf("no #c yet: %v", got)
	}
	f.gotoPage(t, a, "/cookie-show")
	if got := f.must(t, "browser.extract", `{"sessionId":"`+a+`","selector":"#c","kind":"text"}`)["content"]; fmt.Sprint(got) != "[cookie=[who=first]]" {
		t.Errorf("session a's cookie: %v", got)
	}
	f.gotoPage(t, b, "/cookie-show")
	if got := f.must(t, "browser.extract", `{"sessionId":"`+b+`","selector":"#c","kind":"text"}`)["content"]; fmt.Sprint(got) != "[cookie=[]]" {
		t.Errorf("session b sees a cookie: %v", got)
	}

	f.p.mu.Lock()
	dir, profile := f.p.sessions[a].dir, f.p.sessions[a].profile
	if pids := processesUsing(dir, false); len(pids) < 2 {
		t.Fatalf("session a has %d processes", len(pids))
	}
	f.p.mu.Unlock()
	if _, err := os.Stat(profile); err != nil {
		t.Fatalf("the profile directory: %v", err)
	}
	f.must(t, "browser.close", `{"sessionId":"`+a+`"}`)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the session's directory is still there after close: %v", err)
	}
	if pids := processesUsing(dir, false); len(pids) != 0 {
		t.Errorf("processes of the closed session: %v", pids)
	}
	if text, isErr, code := f.call(t, "browser.snapshot", `{"sessionId":"`+a+`"}`); !isErr || code != errcode.NotFound {
		t.Errorf("a closed session: %s", text)
	}

	idle := setup(t, func(o *Options) { o.IdleTimeout = 300 * time.Millisecond })
	id := idle.start(t)
	idle.p.mu.Lock()
	idleDir := idle.p.sessions[id].dir
	idle.p.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(idleDir); os.IsNotExist(err) && len(idle.p.Health().Sessions) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if text, isErr, code := idle.call(t, "browser.snapshot", `{"sessionId":"`+id+`"}`); !isErr || code != errcode.NotFound || !strings.Contains(text, "idle") {
		t.Errorf("after the idle timeout: %s (%s)", text, code)
	}
	if _, err := os.Stat(idleDir); !os.IsNotExist(err) {
		t.Errorf("the idle session's directory is still there: %v", err)
	}
}

// TestOneActionAtATime: calls on one session queue behind its lock, and one
// that waits longer than LockWait is refused as busy.
func TestOneActionAtATime(t *testing.T) {
	f := setup(t, func(o *Options) { o.LockWait = 200 * time.Millisecond })
	id := f.start(t)
	s := f.session(id)
	if err := s.acquire(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	text, isErr, code := f.call(t, "browser.snapshot", `{"sessionId":"`+id+`"}`)
	if !isErr || code != errcode.Timeout || !strings.Contains(text, "busy") {
		t.Errorf("while another action runs: %s (%s)", text, code)
	}
	if h := f.p.Health(); len(h.Sessions) != 1 || !h.Sessions[0].Busy {
		t.Errorf("health while busy: %+v", h)
	}
	s.release()
	f.must(t, "browser.snapshot", `{"sessionId":"`+id+`"}`)
}

// TestCloseKillsEverything: Close kills every browser of every session and
// removes their directories; no process with a session's profile remains.
// When the daemon is root, Chromium ran as the unprivileged user.
func TestCloseKillsEverything(t *testing.T) {
	f := setup(t, nil)
	var dirs []string
	for range 2 {
		id := f.start(t)
		f.gotoPage(t, id, "/")
		f.p.mu.Lock()
		dirs = append(dirs, f.p.sessions[id].dir)
		f.p.mu.Unlock()
	}
	for _, dir := range dirs {
		pids := processesUsing(dir, false)
		if len(pids) < 2 {
			t.Fatalf("%s: %d processes; a browser has several", dir, len(pids))
		}
		if os.Geteuid() == 0 {
			for _, pid := range pids {
				status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
				for _, line := range strings.Split(string(status), "\n") {
					if strings.HasPrefix(line, "Uid:") && strings.Fields(line)[1] == "0" {
						t.Errorf("pid %d of the browser runs as root", pid)
					}
				}
			}
		}
		if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0])); bytes.Contains(cmd, []byte("--no-sandbox")) {
			t.Errorf("the browser runs without its sandbox: %q", cmd)
		}
	}
	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if pids := processesUsing(dir, false); len(pids) != 0 {
			t.Errorf("processes left after Close: %v", pids)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%s left after Close: %v", dir, err)
		}
	}
	if text, isErr, _ := f.call(t, "browser.start", `{}`); !isErr || !strings.Contains(text, "closing") {
		t.Errorf("start after Close: %s", text)
	}
}

// TestNoBrowser: without a browser the provider starts, and the tools say
// what is missing.
func TestNoBrowser(t *testing.T) {
	p, err := New(Options{BrowserPath: "/nonexistent/chromium"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reg := registry.New(registry.Options{})
	if err := reg.Set("browser", p.Tools()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{p: p, reg: reg}
	text, isErr, code := f.call(t, "browser.start", `{}`)
	if !isErr || code != errcode.InvalidConfiguration || !strings.Contains(text, `--browser-path "/nonexistent/chromium"`) {
		t.Errorf("start without a browser: %s (%s)", text, code)
	}
	if h := p.Health(); h.Available || h.Detail == "" {
		t.Errorf("health: %+v", h)
	}
}

// TestBrowserUserIsNotTheCommandsUser: a root daemon refuses to run
// Chromium as the user the agent's commands run as (one of its processes
// could open /proc/<pid>/mem of Chromium's and read every session's
// profile); another user is accepted.
func TestBrowserUserIsNotTheCommandsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Chromium runs as another user only when the daemon is root")
	}
	if _, err := New(Options{BrowserPath: "/nonexistent/chromium", RunAs: "nobody", CommandsRunAs: "nobody"}); err == nil ||
		!strings.Contains(err.Error(), "the user the agent's commands run as") {
		t.Errorf("the commands' user for Chromium: %v", err)
	}
	p, err := New(Options{BrowserPath: "/nonexistent/chromium", RunAs: "nobody", CommandsRunAs: "root"})
	if err != nil {
		t.Fatalf("another user for the commands: %v", err)
	}
	p.Close()
}

// TestRebindingHeldAtProxy: a name that resolves to an admitted address
// when interception checks it and to a refused one afterwards (DNS
// rebinding) never reaches the refused address: Chromium does not resolve
// proxied names, and the proxy connects only to the address it checked.
func TestRebindingHeldAtProxy(t *testing.T) {
	needBrowser(t)
	other, hits := listenOn(t, "127.0.0.2:0")
	_, port, _ := net.SplitHostPort(other.Listener.Addr().String())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><title>Rebind</title><img src="http://rebind.test:%s/pixel.gif">`, port)
	}))
	t.Cleanup(srv.Close)
	var lookups atomic.Int64
	u, _ := url.Parse(srv.URL)
	pageport, _ := strconv.Atoi(u.Port())
	otherport, _ := strconv.Atoi(port)
	n := netguard.New(netguard.Options{
		AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(pageport), uint16(otherport)},
		Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
			if host != "rebind.test" {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			if lookups.Add(1) == 1 {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.2")}, nil
		},
	})
	t.Cleanup(n.CloseIdleConnections)
	f := setup(t, func(o *Options) { o.Net = n })
	f.srv = srv
	id := f.start(t)
	f.gotoPage(t, id, "/")
	deadline := time.Now().Add(5 * time.Second)
	for lookups.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if lookups.Load() < 2 {
		t.Fatalf("rebind.test was looked up %d times; the proxy never dialled it", lookups.Load())
	}
	if h := hits.Load(); h != 0 {
		t.Errorf("the refused address got %d requests", h)
	}
}

// snapLine is one line of an aria snapshot.
type snapLine struct {
	depth      int
	role, name string
	ref        string
	rest       string // value and states
	text       string // the whole line
}

var snapLineRE = regexp.MustCompile(`^((?:  )*)- (\S+)((?: "(?:[^"\\]|\\.)*")?)((?: \[ref=e[0-9]+\])?)(.*)$`)

// parseSnapshot splits an aria snapshot into its lines; a line that is not
// "- role "name" [ref=e1] …" indented by two spaces a level fails the test.
func parseSnapshot(t *testing.T, tree string) []snapLine {
	t.Helper()
	var out []snapLine
	for _, l := range strings.Split(strings.TrimSuffix(tree, "\n"), "\n") {
		m := snapLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("line %q is not an aria snapshot line in:\n%s", l, tree)
		}
		sl := snapLine{depth: len(m[1]) / 2, role: m[2], rest: m[5], text: l}
		if m[3] != "" {
			name, err := strconv.Unquote(strings.TrimPrefix(m[3], " "))
			if err != nil {
				t.Fatalf("line %q: name: %v", l, err)
			}
			sl.name = name
		}
		if m[4] != "" {
			sl.ref = strings.TrimSuffix(strings.TrimPrefix(m[4], " [ref="), "]")
		}
		out = append(out, sl)
	}
	return out
}

// TestAriaSnapshotShape: what docs/browser.md promises of the aria
// snapshot of the home page, not one Chromium's whole tree (which nodes
// without a meaning of their own, such as an unnamed <form> or a label,
// get a line changes from release to release): one line per node, indented by depth under the page's
// RootWebArea; the interactive nodes with their roles, names, values and
// states, and a ref each, numbered in document order, and no ref
// elsewhere; a select's options nested under it; text shown once, under
// its element, and not where it repeats its parent's name; no generic
// containers; and the refs drive browser.act.
func TestAriaSnapshotShape(t *testing.T) {
	f := setup(t, nil)
	id := f.start(t)
	tree := f.gotoPage(t, id, "/")["snapshot"].(string)
	lines := parseSnapshot(t, tree)
	if root := lines[0]; root.depth != 0 || root.role != "RootWebArea" || root.name != "Home" {
		t.Errorf("the first line is %q, not the page's RootWebArea", root.text)
	}
	for i, l := range lines[1:] {
		if l.depth < 1 || l.depth > lines[i].depth+1 {
			t.Errorf("line %q is at depth %d after one at %d: not an outline of one tree", l.text, l.depth, lines[i].depth)
		}
		if skippedRoles[l.role] {
			t.Errorf("line %q: a %s node is shown", l.text, l.role)
		}
	}
	find := func(role, name string) (int, snapLine) {
		t.Helper()
		for i, l := range lines {
			if l.role == role && l.name == name {
				return i, l
			}
		}
		t.Fatalf("no %s %q in:\n%s", role, name, tree)
		return 0, snapLine{}
	}
	if _, h := find("heading", "Welcome"); h.depth != 1 || h.ref != "" || h.rest != " [level=1]" {
		t.Errorf("heading: %q", h.text)
	}
	// The interactive nodes, in document order, each with a ref; the refs
	// grow in that order, and no other line has one.
	want := []struct{ role, name, rest string }{
		{"button", "Press me", ""},
		{"textbox", "Name", ""},
		{"searchbox", "Query", ""},
		{"combobox", "", ` value="Red"`},
		{"option", "Red", " [selected=true]"},
		{"option", "Green", ""},
		{"link", "Other page", ""},
		{"link", "Example", ""},
	}
	var got []snapLine
	for _, l := range lines {
		if l.ref != "" {
			got = append(got, l)
		} else if interactiveRoles[l.role] {
			t.Errorf("line %q: an interactive node without a ref", l.text)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines with refs, want %d:\n%s", len(got), len(want), tree)
	}
	refs := map[string]string{}
	last := 0
	for i, w := range want {
		g := got[i]
		n, _ := strconv.Atoi(strings.TrimPrefix(g.ref, "e"))
		if g.role != w.role || g.name != w.name || g.rest != w.rest || n <= last {
			t.Errorf("ref line %d is %q; want %s %q%s with a ref after e%d", i, g.text, w.role, w.name, w.rest, last)
		}
		last = n
		refs[w.role+" "+w.name] = g.ref
	}
	// The options are in the combobox's subtree.
	ci, combo := find("combobox", "")
	for i, l := range lines {
		if l.role != "option" {
			continue
		}
		for j := ci + 1; j <= i; j++ {
			if i < ci || lines[j].depth <= combo.depth {
				t.Errorf("option %q is not under the combobox:\n%s", l.name, tree)
				break
			}
		}
	}
	// Text is shown once, under its element; not where it repeats the name
	// of its parent.
	if n := strings.Count(tree, `- text "not clicked"`); n != 1 {
		t.Errorf(`text "not clicked" shown %d times`, n)
	}
	if ti, txt := find("text", "not clicked"); lines[ti-1].role != "paragraph" || txt.depth != lines[ti-1].depth+1 {
		t.Errorf("the paragraph's text is not under it:\n%s", tree)
	}
	for _, name := range []string{"Welcome", "Press me", "Other page", "Red"} {
		if strings.Contains(tree, `- text "`+name+`"`) {
			t.Errorf("text %q repeats its parent's name:\n%s", name, tree)
		}
	}

	// The refs name the nodes they are on.
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"click","ref":"`+refs["button Press me"]+`"}`)
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"type","ref":"`+refs["textbox Name"]+`","text":"Ada"}`)
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"select","ref":"`+refs["combobox "]+`","text":"Green"}`)
	after := f.must(t, "browser.snapshot", `{"sessionId":"`+id+`"}`)["tree"].(string)
	for _, w := range []string{`- text "clicked"`, `- textbox "Name" [ref=` + refs["textbox Name"] + `] value="Ada"`,
		`- combobox [ref=` + refs["combobox "] + `] value="Green"`, `- option "Green" [ref=` + refs["option Green"] + `] [selected=true]`} {
		if !strings.Contains(after, w) {
			t.Errorf("after acting by ref, the snapshot lacks %q:\n%s", w, after)
		}
	}
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"click","ref":"`+refs["link Other page"]+`"}`)
	if got := f.must(t, "browser.extract", `{"sessionId":"`+id+`","selector":"title","kind":"text"}`)["content"]; fmt.Sprint(got) != "[Other]" {
		t.Errorf("the link's ref did not navigate: %v", got)
	}
}

// TestBrowserThatFails: a browser that exits at once is a clear error that
// carries what it printed, and leaves no directory behind.
// TestHugeMessage: a page whose accessibility tree is 20 MB makes
// browser.goto's snapshot fail with the limit's error, without the daemon
// reading the message (it allocates about the limit, not the tree); the
// session is closed, its processes and directory gone, and the provider
// starts another.
func TestHugeMessage(t *testing.T) {
	f := setup(t, nil)
	// A lower limit keeps the test quick; the page passes it more than twice.
	const limit = 8 << 20
	f.p.maxMessage = limit
	id := f.start(t)
	f.p.mu.Lock()
	dir := f.p.sessions[id].dir
	f.p.mu.Unlock()
	labelledPage()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	text, isErr, code := f.call(t, "browser.goto", fmt.Sprintf(`{"sessionId":%q,"url":%q}`, id, f.srv.URL+"/labelled"))
	runtime.ReadMemStats(&after)
	if !isErr || code != errcode.TooLarge || !strings.Contains(text, "the page produced a DevTools message larger than 8 MiB; the session was closed") {
		t.Errorf("goto: %.300s (%s)", text, code)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2*limit {
		t.Errorf("the call made the daemon allocate %d bytes; the limit is %d", grew, limit)
	}
	if text, isErr, code := f.call(t, "browser.snapshot", fmt.Sprintf(`{"sessionId":%q}`, id)); !isErr || code != errcode.NotFound {
		t.Errorf("snapshot after: %.300s (%s)", text, code)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		pids := processesUsing(dir, false)
		_, err := os.Stat(dir)
		if len(pids) == 0 && os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the session's end: processes %v, directory %v", pids, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h := f.p.Health(); len(h.Sessions) != 0 {
		t.Errorf("health: %+v", h)
	}
	id = f.start(t)
	if got := f.gotoPage(t, id, "/other"); got["title"] != "Other" {
		t.Errorf("another session: %v", got)
	}
}

func TestBrowserThatFails(t *testing.T) {
	dir := testenv.SharedTempDir(t)
	fake := dir + "/chromium"
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'No usable sandbox! (a stub)' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(fake, 0o755); err != nil { // nobody runs it, whatever the umask
		t.Fatal(err)
	}
	sessions := testenv.SharedTempDir(t)
	os.Chmod(sessions, 0o711)
	f := setup(t, func(o *Options) { o.BrowserPath = fake; o.TempDir = sessions })
	text, isErr, _ := f.call(t, "browser.start", `{}`)
	if !isErr || !strings.Contains(text, "starting "+fake) || !strings.Contains(text, "No usable sandbox! (a stub)") {
		t.Errorf("start: %s", text)
	}
	if entries, _ := os.ReadDir(sessions); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
	if h := f.p.Health(); len(h.Sessions) != 0 {
		t.Errorf("health: %+v", h)
	}
}

// TestQueueAndOwner: two calls on one session at once both run, one after
// the other; another caller (another token entry) does not see the
// session.
func TestQueueAndOwner(t *testing.T) {
	f := setup(t, nil)
	id := f.start(t)
	errs := make(chan string, 2)
	for _, path := range []string{"/other", "/tall"} {
		go func() {
			text, isErr, _ := f.call(t, "browser.goto", fmt.Sprintf(`{"sessionId":%q,"url":%q}`, id, f.srv.URL+path))
			if isErr {
				errs <- path + ": " + text
				return
			}
			errs <- ""
		}()
	}
	for range 2 {
		if e := <-errs; e != "" {
			t.Errorf("concurrent goto %s", e)
		}
	}
	res, err := f.reg.Call(context.Background(), "browser.snapshot", registry.Call{Args: json.RawMessage(`{"sessionId":"` + id + `"}`), Caller: "someone-else"})
	if err != nil || !res.IsError || registry.Code(res) != errcode.NotFound {
		t.Errorf("another caller's call: %v %+v", err, res)
	}
}

// TestDownloadsDenied: a link to an attachment, and goto of it, save
// nothing: no file of its name is under the session's directory (the
// browser's HOME), and none appears in the daemon's Downloads.
func TestDownloadsDenied(t *testing.T) {
	needBrowser(t)
	const marker = "agentbe-download-marker-7f3a"
	// What the daemon's Downloads holds already is the machine's, not this
	// test's: only what appears there during it counts.
	home, _ := os.UserHomeDir()
	downloads := home + "/Downloads"
	before := map[string]bool{}
	filepath.WalkDir(downloads, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			before[path] = true
		}
		return nil
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>DL</title><a id="dl" href="/file.bin" download>get</a>`)
	})
	mux.HandleFunc("/file.bin", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="file.bin"`)
		fmt.Fprint(w, marker)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f := setup(t, func(o *Options) { o.Net = allowing(t, srv.URL) })
	f.srv = srv
	id := f.start(t)
	f.gotoPage(t, id, "/")
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"click","selector":"#dl"}`)
	f.call(t, "browser.goto", `{"sessionId":"`+id+`","url":"`+srv.URL+`/file.bin"}`)
	time.Sleep(500 * time.Millisecond)
	f.p.mu.Lock()
	dir := f.p.sessions[id].dir
	f.p.mu.Unlock()
	for _, root := range []string{dir, downloads} {
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || before[path] {
				return nil
			}
			// The HTTP cache may hold the response; a download is a file
			// of its name, or Chromium's partial one.
			if name := d.Name(); strings.Contains(name, "file.bin") || strings.HasSuffix(name, ".crdownload") {
				t.Errorf("the download was saved: %s", path)
			}
			return nil
		})
	}
}

// TestScreenshotBounds: a page larger than the screenshot's bounds is cut
// to them, and the result says so.
func TestScreenshotBounds(t *testing.T) {
	needBrowser(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Huge</title><style>body{margin:0}</style><div style="width:9000px;height:30000px"></div>`)
	}))
	t.Cleanup(srv.Close)
	f := setup(t, func(o *Options) { o.Net = allowing(t, srv.URL) })
	f.srv = srv
	id := f.start(t)
	f.gotoPage(t, id, "/")
	res, err := f.reg.Call(context.Background(), "browser.screenshot", registry.Call{Args: json.RawMessage(`{"sessionId":"` + id + `","fullPage":true}`)})
	if err != nil || res.IsError {
		t.Fatalf("screenshot: %v %v", err, res.Content)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(res.Content[0].(*mcp.ImageContent).Data))
	wantH := MaxScreenshotPixels / MaxScreenshotWidth
	if err != nil || cfg.Width != MaxScreenshotWidth || cfg.Height != wantH {
		t.Errorf("%dx%d, %v; want %dx%d", cfg.Width, cfg.Height, err, MaxScreenshotWidth, wantH)
	}
	if meta := res.Content[1].(*mcp.TextContent).Text; !strings.Contains(meta, `"truncated":true`) {
		t.Errorf("not marked truncated: %s", meta)
	}
}

// TestJSHeapBound: a page that allocates without end is stopped at the
// session's JavaScript heap bound (JSHeapMiB): its renderer dies there, the
// session's memory stays near the bound, and the daemon answers on.
func TestJSHeapBound(t *testing.T) {
	const heapMiB = 128
	f := setup(t, func(o *Options) { o.JSHeapMiB = heapMiB })
	id := f.start(t)
	f.p.mu.Lock()
	dir := f.p.sessions[id].dir
	f.p.mu.Unlock()
	var flagged bool
	for _, pid := range processesUsing(dir, false) {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		flagged = flagged || strings.Contains(string(cmdline), fmt.Sprintf("--max-old-space-size=%d", heapMiB))
	}
	if !flagged {
		t.Fatal("no process of the session runs with the heap bound")
	}
	f.gotoPage(t, id, "/hog")
	// The click's script never returns: the call ends with the renderer's
	// death or its own timeout, either of which is fine here.
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.call(t, "browser.act", fmt.Sprintf(`{"sessionId":%q,"type":"click","selector":"#hog"}`, id))
	}()
	// Without the bound, V8's own limit on this machine is gigabytes: the
	// loop reaches past 1 GiB in a few seconds.
	var peak int64
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var kib int64
		for _, pid := range processesUsing(dir, false) {
			kib += pssKiB(pid)
		}
		peak = max(peak, kib)
	}
	if limit := int64(heapMiB+600) << 10; peak > limit {
		t.Errorf("the session held %d MiB at its peak; with a %d MiB heap bound it should stay under %d MiB", peak>>10, heapMiB, limit>>10)
	}
	<-done
	f.must(t, "browser.close", fmt.Sprintf(`{"sessionId":%q}`, id))
	other := f.start(t)
	if got := f.gotoPage(t, other, "/other"); got["title"] != "Other" {
		t.Errorf("another session after the hog: %v", got)
	}
}

// TestGotoAnswersAParsedPage: a page whose image never arrives has no load
// event; browser.goto answers it LoadGrace after its DOMContentLoaded, as
// it is (title, status, snapshot), instead of failing at NavigateTimeout,
// and the session goes on.
func TestGotoAnswersAParsedPage(t *testing.T) {
	needBrowser(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hang":
			select { // the image: never sent
			case <-release:
			case <-r.Context().Done():
			}
		case "/":
			fmt.Fprint(w, `<!doctype html><title>Parsed</title><h1>Parsed, not loaded</h1><img alt="never" src="/hang"><a href="/next">Next</a>`)
		default:
			fmt.Fprint(w, `<!doctype html><title>Next</title><p>next</p>`)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close: cleanups run last first
	p, err := New(Options{Net: allowing(t, srv.URL), AllowHTTP: true, NavigateTimeout: 4 * LoadGrace, TempDir: testenv.SharedTempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	reg := registry.New(registry.Options{MaxConcurrent: 20})
	if err := reg.Set("browser", p.Tools()); err != nil {
		t.Fatal(err)
	}
	f := &fixture{p: p, reg: reg, srv: srv}
	id := f.start(t)
	got := f.gotoPage(t, id, "/")
	if got["title"] != "Parsed" || got["status"] != float64(200) || !strings.Contains(fmt.Sprint(got["snapshot"]), `heading "Parsed, not loaded"`) {
		t.Errorf("goto of a page that never loads: %v", got)
	}
	ref := refOf(t, f.must(t, "browser.snapshot", `{"sessionId":"`+id+`"}`)["tree"].(string), "link", "Next")
	f.must(t, "browser.act", `{"sessionId":"`+id+`","type":"click","ref":"`+ref+`"}`)
	if got := f.gotoPage(t, id, "/next"); got["title"] != "Next" {
		t.Errorf("the next page: %v", got)
	}
}

package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/tools/browser"
)

// TestBrowserToolsOverMCP: with --browser-tools a go-sdk MCP client starts
// a session, loads a page of a loopback server the test admits, clicks a
// button by the ref of a snapshot, takes a screenshot (an image content)
// and sees the session in /health; stopping the daemon leaves no browser
// process behind.
func TestBrowserToolsOverMCP(t *testing.T) {
	testenv.Command(t, "chromium", "chromium")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><title>Daemon page</title><p id="out">before</p>
<button onclick="document.getElementById('out').textContent='after'">Go</button>`)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	// The sessions' directories live here, so that the processes of this
	// test's browsers can be told from any other's. Chromium may run as
	// nobody, who must be able to pass through it and what is above it
	// (under /tmp, whatever TMPDIR is).
	tmp := testenv.SharedTempDir(t)
	if err := os.Chmod(tmp, 0o711); err != nil {
		t.Fatal(err)
	}
	c := testConfig(t)
	c.BrowserTools = true
	c.BrowserAllowHTTP = true
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := startWith(t, c, Options{browserTweak: func(o *browser.Options) {
		o.Net = netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}})
		o.TempDir = tmp
	}})

	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "browser", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: r.url + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	for _, n := range []string{"browser.start", "browser.goto", "browser.snapshot", "browser.act", "browser.screenshot", "browser.extract", "browser.close"} {
		if !names[n] {
			t.Errorf("tools/list lacks %s", n)
		}
	}
	call := func(tool, args string) (*mcp.CallToolResult, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		var out map[string]any
		last := res.Content[len(res.Content)-1].(*mcp.TextContent).Text
		if res.IsError {
			t.Fatalf("%s %s: %s", tool, args, last)
		}
		if err := json.Unmarshal([]byte(last), &out); err != nil {
			t.Fatalf("%s: %s", tool, last)
		}
		return res, out
	}
	_, started := call("browser.start", `{}`)
	id, _ := started["sessionId"].(string)
	_, page := call("browser.goto", `{"sessionId":"`+id+`","url":"`+srv.URL+`/"}`)
	if page["title"] != "Daemon page" {
		t.Fatalf("goto: %v", page)
	}
	snap, _ := page["snapshot"].(string)
	i := strings.Index(snap, `button "Go" [ref=`)
	if i < 0 {
		t.Fatalf("no button in the snapshot:\n%s", snap)
	}
	ref := snap[i+len(`button "Go" [ref=`):]
	ref = ref[:strings.IndexByte(ref, ']')]
	call("browser.act", `{"sessionId":"`+id+`","type":"click","ref":"`+ref+`"}`)
	if _, out := call("browser.extract", `{"sessionId":"`+id+`","selector":"#out","kind":"text"}`); fmt.Sprint(out["content"]) != "[after]" {
		t.Errorf("after the click: %v", out)
	}
	res, _ := call("browser.screenshot", `{"sessionId":"`+id+`"}`)
	img, ok := res.Content[0].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" {
		t.Fatalf("screenshot: %#v", res.Content[0])
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(img.Data)); err != nil || cfg.Width != browser.DefaultViewportWidth || cfg.Height != browser.DefaultViewportHeight {
		t.Errorf("screenshot: %+v %v", cfg, err)
	}

	_, body := get(t, r.url+"/health")
	var health struct{ Browser *browser.Health }
	if err := json.Unmarshal(body, &health); err != nil || health.Browser == nil || !health.Browser.Available ||
		len(health.Browser.Sessions) != 1 || health.Browser.Sessions[0].IDPrefix != id[:8] || strings.Contains(string(body), id) {
		t.Errorf("/health: %s", body)
	}
	if n := len(processesUnder(tmp)); n < 2 {
		t.Fatalf("%d browser processes while the session is open", n)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if pids := processesUnder(tmp); len(pids) != 0 {
		t.Errorf("browser processes outlived the daemon: %v", pids)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("session directories outlived the daemon: %v", entries)
	}
}

// processesUnder lists the processes whose command line names a path in dir.
func processesUnder(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && bytes.Contains(b, []byte(dir+"/")) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

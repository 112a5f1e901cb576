package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	"github.com/chromedp/chromedp"
	jsonv2 "github.com/go-json-experiment/json"

	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// axPages are pages whose accessibility trees TestAXTreeDecoders decodes
// both ways: a form of every kind of control and state a snapshot shows,
// hidden elements of each kind, open and closed shadow roots, frames,
// names that need escapes in JSON, and the 200 links of
// bench/browser/peer.sh.
var axPages = map[string]string{
	"/form": `<!doctype html><title>Form "quoted" \ back</title><h2>Sign up</h2><h3>Details</h3>
<form><label>Name <input required value="Ada"></label>
<label><input type="checkbox" checked> Agree</label>
<label><input type="radio" name="r" checked> One</label><label><input type="radio" name="r"> Two</label>
<textarea aria-label="Notes">line one
line two</textarea>
<select aria-label="Size"><option>S</option><option selected>M</option></select>
<button disabled>Send</button><button aria-pressed="true">Bold</button>
<details open><summary>More</summary><p>Inside</p></details>
<input type="range" aria-label="Volume" value="3" min="0" max="10"></form>`,
	"/hidden": `<!doctype html><title>Hidden</title>
<p>shown</p><p style="display:none">display none</p><p style="visibility:hidden">visibility hidden</p>
<p aria-hidden="true">aria hidden</p><p hidden>hidden attribute</p>
<button style="position:absolute;left:-9999px">offscreen</button><button style="width:0;height:0;overflow:hidden;padding:0;border:0">zero</button>
<div role="none"><span>generic text</span></div><img alt="a picture" src="data:,">`,
	"/shadow": `<!doctype html><title>Shadow</title><div id="open"></div><div id="closed"></div>
<my-el><span slot="s">slotted</span></my-el>
<script>
document.getElementById("open").attachShadow({mode: "open"}).innerHTML = '<button>In open shadow</button><a href="/x">shadow link</a>';
document.getElementById("closed").attachShadow({mode: "closed"}).innerHTML = '<input aria-label="In closed shadow">';
customElements.define("my-el", class extends HTMLElement { constructor() { super(); this.attachShadow({mode: "open"}).innerHTML = '<h4>Card</h4><slot name="s"></slot>'; } });
</script>`,
	"/frames": `<!doctype html><title>Frames</title><p>before</p>
<iframe title="inline" srcdoc="<button>In srcdoc</button>"></iframe>
<iframe title="same site" src="/form"></iframe><p>after</p>`,
	"/escapes": "<!doctype html><title>Esc</title><button>quote \" backslash \\ tab\there</button>" +
		"<a href=\"/u\">unicode é 中文 😀 \u2028 &lt;tag&gt; &amp;</a><p>control \x01 char</p><button aria-label=\"  spaced   out  \">x</button>",
	"/links": linksPage(200),
}

// TestAXTreeDecoders: the accessibility tree of each of axPages, as
// Chromium wrote it, decodes the same into axTree (decodeAXTree) as through
// chromedp's JSON decoder into the struct the snapshot read before, and as
// through encoding/json; and both give the same snapshot, refs included.
func TestAXTreeDecoders(t *testing.T) {
	needBrowser(t)
	mux := http.NewServeMux()
	for path, body := range axPages {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, body)
		})
	}
	srv, p, s := servedSession(t, mux)
	type chromedpTree struct {
		Nodes []*axNode `json:"nodes"`
	}
	for path := range axPages {
		t.Run(strings.TrimPrefix(path, "/"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
			defer cancel()
			if _, _, _, err := p.navigate(ctx, s, srv.URL+path); err != nil {
				t.Fatal(err)
			}
			raw, err := chromedp.Run(ctx, func(ctx context.Context, tg *chromedp.Target) (json.RawMessage, error) {
				var raw json.RawMessage
				err := tg.Call(ctx, string(accessibility.GetFullAXTree.Method), accessibility.GetFullAXTreeParams{}, &raw)
				return raw, err
			})
			if err != nil {
				t.Fatal(err)
			}
			// The same JSON decoded as chromedp's Target.Call decodes a
			// result: the struct the snapshot read before, and axTree.
			var before chromedpTree
			var now axTree
			for _, res := range []any{&before, &now} {
				if err := jsonv2.Unmarshal(raw, res, chromedp.DefaultUnmarshalOptions); err != nil {
					t.Fatal(err)
				}
			}
			if len(now.Nodes) < 3 {
				t.Fatalf("a tree of %d nodes: %s", len(now.Nodes), clip.String(string(raw), 500))
			}
			var std chromedpTree
			if err := json.Unmarshal(raw, &std); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(now.Nodes, std.Nodes) {
				t.Errorf("decodeAXTree and encoding/json differ on the same JSON:\n%s", firstDiff(now.Nodes, std.Nodes))
			}
			if !reflect.DeepEqual(now.Nodes, before.Nodes) {
				t.Errorf("axTree and chromedp's decoder differ on the same JSON:\n%s", firstDiff(now.Nodes, before.Nodes))
			}
			for _, interactiveOnly := range []bool{false, true} {
				old, oldCut := writeAria(s, before.Nodes, interactiveOnly, DefaultMaxSnapshotBytes)
				neu, neuCut := writeAria(s, now.Nodes, interactiveOnly, DefaultMaxSnapshotBytes)
				if old != neu || oldCut != neuCut || (old == "" && !interactiveOnly) {
					t.Errorf("interactiveOnly %v: the snapshots differ:\n%s\n---\n%s", interactiveOnly, old, neu)
				}
			}
			if path == "/links" {
				tree, _, err := p.ariaSnapshot(ctx, s, false, DefaultMaxSnapshotBytes)
				if err != nil || !strings.Contains(tree, `- link "Link 200" [ref=`) {
					t.Errorf("the snapshot of the links page (%v) lacks its last link:\n%s", err, tree)
				}
			}
		})
	}
}

// firstDiff names the first node where two decoded trees differ.
func firstDiff(a, b []*axNode) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d nodes against %d", len(a), len(b))
	}
	for i := range a {
		if !reflect.DeepEqual(a[i], b[i]) {
			x, _ := json.Marshal(a[i])
			y, _ := json.Marshal(b[i])
			return fmt.Sprintf("node %d:\n%s\n%s", i, x, y)
		}
	}
	return "(no node differs)"
}

// exactKeys reports whether every key of the JSON that names a field of
// axNode, axValue or axProperty in another case (encoding/json matches
// keys without case, decodeAXTree and chromedp's decoder exactly) is
// absent: raw is compared with encoding/json only then.
func exactKeys(raw []byte) bool {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	for {
		tok, err := dec.Token()
		if err != nil {
			return true
		}
		if k, ok := tok.(string); ok {
			for _, f := range []string{"nodes", "nodeId", "ignored", "role", "name", "value", "properties", "parentId", "childIds", "backendDOMNodeId"} {
				if k != f && strings.EqualFold(k, f) {
					return false
				}
			}
		}
	}
}

// FuzzDecodeAXTree: decodeAXTree never panics, and a tree that
// encoding/json wrote (escapes of every kind, any text) decodes as
// encoding/json decodes it, into nodes that do not refer to the JSON;
// axString reads each value as json.Unmarshal does.
func FuzzDecodeAXTree(f *testing.F) {
	f.Add([]byte(`{"nodes":[{"nodeId":"1","ignored":false,"role":{"type":"role","value":"link"},"name":{"type":"computedString","value":"a \"b\" \u00e9","sources":[{"type":"contents","value":{"type":"computedString","value":"x"}}]},"childIds":["2"],"backendDOMNodeId":5}]}`),
		"name", "\x00<>&\u2028\\\"")
	f.Add([]byte(`{"nodes":[{"nodeId":"2","parentId":"1","ignoredReasons":[{"name":"x","value":{"type":"boolean","value":true}}],"ignored":true,"properties":[{"name":"level","value":{"type":"integer","value":2}}]}],"extra":[[[{}]]]}`),
		"\xff\xfe", "😀")
	f.Add([]byte(`{"nodes":null}`), "", "")
	f.Add([]byte(`{"nodes":[null,{"nodeId":"\u0031"}]}`), "é", "\t")
	f.Add([]byte(`{"nodes":[{"nodeId":"1","nodeId":null,"parentId":null,"properties":[{"name":null}]}]}`), "", "")
	f.Fuzz(func(t *testing.T, raw []byte, name, value string) {
		// Whatever the bytes, no panic; and JSON that encoding/json reads
		// with the keys as Chromium writes them (matched exactly) reads
		// the same.
		if got, err := decodeAXTree(raw); err == nil && json.Valid(raw) && exactKeys(raw) {
			var std struct {
				Nodes []*axNode `json:"nodes"`
			}
			if json.Unmarshal(raw, &std) == nil && !reflect.DeepEqual(got, std.Nodes) {
				t.Fatalf("decodeAXTree and encoding/json differ on %s:\n%s", raw, firstDiff(got, std.Nodes))
			}
		}
		tree := map[string]any{
			"extra": []any{map[string]any{"nodes": name}},
			"nodes": []any{map[string]any{
				"nodeId": name, "ignored": len(name)%2 == 0,
				"role": map[string]any{"type": "role", "value": value},
				"name": map[string]any{"type": "computedString", "value": name,
					"sources": []any{map[string]any{"value": map[string]any{"value": value}, "attribute": name}}},
				"value":            map[string]any{"type": "number", "value": len(value)},
				"properties":       []any{map[string]any{"name": value, "value": map[string]any{"value": name}}, map[string]any{"name": "checked", "value": map[string]any{"value": len(name) > 3}}},
				"parentId":         value,
				"childIds":         []string{name, value},
				"backendDOMNodeId": len(name) + len(value),
				"ignoredReasons":   []any{map[string]any{"name": value}},
			}, nil},
		}
		data, err := json.Marshal(tree)
		if err != nil {
			t.Fatal(err)
		}
		var std struct {
			Nodes []*axNode `json:"nodes"`
		}
		if err := json.Unmarshal(data, &std); err != nil {
			t.Fatal(err)
		}
		got, err := decodeAXTree(data)
		if err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		written := string(data)
		clear(data) // what was decoded does not refer to data
		if !reflect.DeepEqual(got, std.Nodes) {
			t.Fatalf("decodeAXTree and encoding/json differ on %s:\n%s", written, firstDiff(got, std.Nodes))
		}
		for _, v := range []*axValue{got[0].Role, got[0].Name, got[0].Value, got[0].Properties[0].Value} {
			var s string
			want := string(v.Value)
			if json.Unmarshal(v.Value, &s) == nil {
				want = s
			}
			if axString(v) != want {
				t.Fatalf("axString(%s) = %q, json.Unmarshal gives %q", v.Value, axString(v), want)
			}
		}
	})
}

// servedSession serves h on a loopback server the provider may reach, and
// starts a provider with one session; both end with the test.
func servedSession(tb testing.TB, h http.Handler) (*httptest.Server, *Provider, *session) {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	p, err := New(Options{Net: allowing(tb, srv.URL), AllowHTTP: true, MaxSessions: 1, TempDir: testenv.SharedTempDir(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	s, _, err := p.startSession("", "test", true, localCaller{})
	if err != nil {
		tb.Fatal(err)
	}
	return srv, p, s
}

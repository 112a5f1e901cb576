package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outcome is what every face must agree on: whether the call failed, and
// its text.
type outcome struct {
	isError bool
	text    string
}

// elapsed matches the durations a timeout message names, which differ from
// call to call.
var elapsed = regexp.MustCompile(`\d+(\.\d+)?(ms|s|µs)`)

// TestFacesAgree runs one table of calls on the workspace tools through
// every face of real daemons over one root — /mcp on the fast path (the
// default, stateless), /mcp through the SDK (a session of a second daemon
// with --mcp-sessions), POST /execute and /gateway — each with the request
// scoped by X-Scope-Path, and asserts the same outcome on all four.
// tools/list, GET /tools and tools.list name the same tools too.
func TestFacesAgree(t *testing.T) {
	c := testConfig(t)
	c.ExecTimeout = 500 * time.Millisecond
	if err := os.MkdirAll(filepath.Join(c.Root, "proj"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.Root, "proj", "a.txt"), []byte("hello\nworld\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.Root, "outside.txt"), []byte("not in the scope"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	withSessions := c
	withSessions.MCPSessions = true
	withSessions.SSHHostKey = filepath.Join(t.TempDir(), "host_key")
	rs := start(t, withSessions, nil)
	hdr := http.Header{"X-Scope-Path": {"proj"}}

	// The SDK path: a go-sdk client with a session.
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "faces", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: rs.url + "/mcp", HTTPClient: &http.Client{Transport: headerRT{hdr}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// /gateway, scoped by its upgrade request.
	gw := dialGWHeader(t, r.url, hdr)

	fast := func(tool, args string) outcome {
		req, _ := http.NewRequest(http.MethodPost, r.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`))
		req.Header = hdr.Clone()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var rpc struct {
			Result *struct {
				Content []struct{ Text string }
				IsError bool
			}
			Error *struct{ Message string }
		}
		if err := json.Unmarshal(b, &rpc); err != nil {
			t.Fatalf("fast path %s: %s", tool, b)
		}
		if rpc.Error != nil {
			return outcome{true, rpc.Error.Message}
		}
		return outcome{rpc.Result.IsError, joinTexts(rpc.Result.Content)}
	}
	sdk := func(tool, args string) outcome {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: json.RawMessage(args)})
		if err != nil {
			return outcome{true, err.Error()}
		}
		var parts []struct{ Text string }
		for _, c := range res.Content {
			parts = append(parts, struct{ Text string }{c.(*mcp.TextContent).Text})
		}
		return outcome{res.IsError, joinTexts(parts)}
	}
	rest := func(tool, args string) outcome {
		req, _ := http.NewRequest(http.MethodPost, r.url+"/execute", strings.NewReader(`{"tool_name":"`+tool+`","arguments":`+args+`}`))
		req.Header = hdr.Clone()
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct{ Status, Output, Error, Message string }
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode == http.StatusNotFound {
			return outcome{true, out.Message}
		}
		return outcome{out.Status == "error", out.Output}
	}
	gateway := func(tool, args string) outcome {
		got := rpcGW(t, gw, `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"toolId":"`+tool+`","sessionId":"s","args":`+args+`}}`)
		var rpc struct {
			Result *struct {
				Content []struct{ Text string }
				IsError bool
			}
			Error *struct{ Message string }
		}
		if err := json.Unmarshal([]byte(got), &rpc); err != nil {
			t.Fatalf("gateway %s: %s", tool, got)
		}
		if rpc.Error != nil {
			return outcome{true, rpc.Error.Message}
		}
		return outcome{rpc.Result.IsError, joinTexts(rpc.Result.Content)}
	}

	for _, tc := range []struct {
		name, tool, args string
		isError          bool
		want             string // in the text
	}{
		{"read", "read_text_file", `{"path":"a.txt"}`, false, "hello\nworld\n"},
		{"read head", "read_text_file", `{"path":"a.txt","head":1}`, false, "hello"},
		{"bad arguments", "read_text_file", `{"pathx":1}`, true, `missing required argument "path"`},
		{"escape", "read_text_file", `{"path":"../outside.txt"}`, true, "Path escapes scope boundary: ../outside.txt"},
		{"missing", "read_text_file", `{"path":"nope.txt"}`, true, "no such file or directory"},
		{"write", "write_file", `{"path":"w.txt","content":"x"}`, false, "Successfully wrote to w.txt"},
		{"edit fails", "edit_file", `{"path":"a.txt","edits":[{"oldText":"absent","newText":"y"}]}`, true, "could not find exact match"},
		{"list", "list_directory", `{"path":"."}`, false, "[FILE] a.txt"},
		{"exec", "exec", `{"command":"pwd"}`, false, c.Root + "/proj"},
		{"exec fails", "exec", `{"command":"ls no-such-file"}`, true, "No such file"},
		{"exec blocked", "exec", `{"command":"sudo id"}`, true, "privilege-escalation"},
		{"exec timeout", "exec", `{"command":"sleep 5"}`, true, "timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results := map[string]outcome{
				"mcp-fast": fast(tc.tool, tc.args), "mcp-sdk": sdk(tc.tool, tc.args),
				"rest": rest(tc.tool, tc.args), "gateway": gateway(tc.tool, tc.args),
			}
			want := results["mcp-fast"]
			want.text = elapsed.ReplaceAllString(want.text, "T")
			if want.isError != tc.isError || !strings.Contains(want.text, tc.want) {
				t.Errorf("mcp-fast: %+v; want isError=%v with %q", results["mcp-fast"], tc.isError, tc.want)
			}
			for face, got := range results {
				got.text = elapsed.ReplaceAllString(got.text, "T")
				if got != want {
					t.Errorf("%s disagrees with mcp-fast:\n%s %+v\nmcp-fast %+v", face, face, got, want)
				}
			}
		})
	}
	// An unknown tool: every face refuses it (each in its own wording).
	for face, got := range map[string]outcome{"mcp-fast": fast("nope", `{}`), "mcp-sdk": sdk("nope", `{}`), "rest": rest("nope", `{}`), "gateway": gateway("nope", `{}`)} {
		if !got.isError || !strings.Contains(strings.ToLower(got.text), "nope") {
			t.Errorf("unknown tool on %s: %+v", face, got)
		}
	}
	// The same tools are listed everywhere.
	var sdkNames []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		sdkNames = append(sdkNames, tool.Name)
	}
	_, restList := get(t, r.url+"/tools")
	gwList := rpcGW(t, gw, `{"jsonrpc":"2.0","id":9,"method":"tools.list","params":{"sessionId":"s"}}`)
	for _, name := range sdkNames {
		if !strings.Contains(string(restList), `"name":"`+name+`"`) || !strings.Contains(gwList, `"name":"`+name+`"`) {
			t.Errorf("%s is listed over MCP but not on every face", name)
		}
	}
	if len(sdkNames) < 10 {
		t.Errorf("tools/list: %v", sdkNames)
	}
}

func joinTexts(parts []struct{ Text string }) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

type headerRT struct{ h http.Header }

func (rt headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range rt.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

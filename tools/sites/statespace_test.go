package sites

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// postPrefer is a POST through the handler with the given Prefer header
// ("" for none); it returns the reply and the Preference-Applied header.
func postPrefer(t *testing.T, h http.Handler, target, prefer string, req ActionRequest) (reply, string) {
	t.Helper()
	b, _ := json.Marshal(req)
	r := httptest.NewRequest(http.MethodPost, "http://site"+target, strings.NewReader(string(b)))
	r.Header.Set("Content-Type", "application/json")
	if prefer != "" {
		r.Header.Set("Prefer", prefer)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	out := reply{status: rec.Code, ctype: rec.Header().Get("Content-Type"), body: rec.Body.String()}
	if err := json.Unmarshal(rec.Body.Bytes(), &out.action); err != nil {
		t.Fatalf("POST %s: not JSON: %s", target, rec.Body)
	}
	return out, rec.Header().Get("Preference-Applied")
}

// TestNotAllowedStatus: a command no pattern allows is 403 by default, as
// the statespace RFD's table has it, and 400 (statespace's Rust server)
// when the operator picks it; the MCP refusal keeps INVALID_ARGUMENT either
// way (it is no path escape), and New takes no third status.
func TestNotAllowedStatus(t *testing.T) {
	for _, tc := range []struct {
		set, want int
	}{{0, http.StatusForbidden}, {http.StatusForbidden, http.StatusForbidden}, {http.StatusBadRequest, http.StatusBadRequest}} {
		s, _ := exampleSite(t, func(o *Options) { o.NotAllowedStatus = tc.set })
		h := serve(s)
		r := post(t, h, "/", ActionRequest{Command: []string{"rm", "-rf", "data"}})
		if r.status != tc.want || r.action.Returncode != 1 || !strings.Contains(r.action.Stderr, `command not allowed by /README.md: ["rm" "-rf" "data"] matches none of its tools`) {
			t.Errorf("NotAllowedStatus %d: %d %+v; want %d", tc.set, r.status, r.action, tc.want)
		}
		// Allowed commands and other refusals keep their statuses.
		if r := post(t, h, "/", ActionRequest{Command: []string{"ls"}}); r.status != http.StatusOK {
			t.Errorf("NotAllowedStatus %d: an allowed command: %d %+v", tc.set, r.status, r.action)
		}
		if r := post(t, h, "/", ActionRequest{Command: []string{}}); r.status != http.StatusBadRequest {
			t.Errorf("NotAllowedStatus %d: an empty command: %d %+v", tc.set, r.status, r.action)
		}
		if r := post(t, h, "/", ActionRequest{Command: []string{"echo", "/etc/passwd"}}); r.status != http.StatusForbidden || !strings.Contains(r.action.Stderr, "absolute path") {
			t.Errorf("NotAllowedStatus %d: an absolute argument: %d %+v", tc.set, r.status, r.action)
		}
		var run registry.Tool
		for _, tool := range s.Tools() {
			if tool.Name == "run_command" {
				run = tool
			}
		}
		res := run.Handler(t.Context(), registry.Call{Args: json.RawMessage(`{"path":"","command":["rm","-rf","data"]}`)})
		if !res.IsError || registry.Code(res) != errcode.InvalidArgument {
			t.Errorf("NotAllowedStatus %d: run_command: isError %v, code %q", tc.set, res.IsError, registry.Code(res))
		}
	}
	s, _ := exampleSite(t, nil)
	if _, err := New(Options{Workspace: s.ws, Executor: s.exe, NotAllowedStatus: 418}); err == nil || !strings.Contains(err.Error(), "NotAllowedStatus 418: want 403 or 400") {
		t.Errorf("NotAllowedStatus 418: %v", err)
	}
}

// TestStrictOutput: output over the cap is cut with a notice by default,
// and a 413 without the output when the request sends "Prefer:
// handling=strict" (RFC 7240), as statespace's Rust server answers; with
// StrictOutput the 413 is the server's default and "handling=lenient" asks
// for the cut answer. Output under the cap is whole in every mode.
func TestStrictOutput(t *testing.T) {
	big := ActionRequest{Command: []string{"seq", "1", "20000"}} // 108894 bytes
	small := ActionRequest{Command: []string{"seq", "1", "3"}}
	for _, tc := range []struct {
		name         string
		serverStrict bool
		prefer       string
		req          ActionRequest
		status       int
		applied      string
		want         string // in stdout+stderr
	}{
		{"default cuts", false, "", big, 200, "", "[... output truncated: "},
		{"strict asked", false, "handling=strict", big, 413, "handling=strict", "output too large: stdout is 108894 bytes, over the limit of 4096 bytes"},
		{"strict among other preferences", false, `respond-async, wait=10, Handling="Strict"`, big, 413, "handling=strict", "output too large"},
		{"lenient asked", false, "handling=lenient", big, 200, "handling=lenient", "[... output truncated: "},
		{"strict under the cap", false, "handling=strict", small, 200, "handling=strict", "1\n2\n3\n"},
		{"strict server", true, "", big, 413, "", "output too large: stdout is 108894 bytes"},
		{"strict server, lenient asked", true, "handling=lenient", big, 200, "handling=lenient", "[... output truncated: "},
		{"strict server under the cap", true, "", small, 200, "", "1\n2\n3\n"},
		{"unknown preference ignored", true, "handling=sloppy", big, 413, "", "output too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, root := exampleSite(t, func(o *Options) { o.MaxOutput = 4096; o.StrictOutput = tc.serverStrict })
			writePage(t, root, "seq.md", "---\ntools:\n  - [seq, {}, {}, \";\"]\n---\n")
			r, applied := postPrefer(t, serve(s), "/seq", tc.prefer, tc.req)
			got := r.action.Stdout + r.action.Stderr
			if r.status != tc.status || applied != tc.applied || !strings.Contains(got, tc.want) {
				t.Fatalf("%d (applied %q) %.300q; want %d (applied %q) containing %q", r.status, applied, got, tc.status, tc.applied, tc.want)
			}
			if r.status == http.StatusRequestEntityTooLarge && (r.action.Stdout != "" || r.action.Returncode != 1) {
				t.Errorf("a 413 carries output: %.200q, returncode %d", r.action.Stdout, r.action.Returncode)
			}
			if r.status == http.StatusOK && tc.req.Command[2] == "20000" && (len(r.action.Stdout) > 4096+200 || !strings.HasPrefix(r.action.Stdout, "1\n2\n") || !strings.HasSuffix(r.action.Stdout, "19999\n20000\n")) {
				t.Errorf("the cut answer keeps the head and tail within the cap: %d bytes", len(r.action.Stdout))
			}
		})
	}
}

// TestStrictOutputStderrAndCurl: the strict rule holds for stderr and for
// the curl builtin's body too.
func TestStrictOutputStderrAndCurl(t *testing.T) {
	s, root := exampleSite(t, func(o *Options) { o.MaxOutput = 64 })
	writePage(t, root, "err.md", "---\ntools:\n  - [ls, {}, \";\"]\n---\n")
	long := strings.Repeat("x", 100)
	if r, _ := postPrefer(t, serve(s), "/err", "handling=strict", ActionRequest{Command: []string{"ls", long}}); r.status != 413 || !strings.Contains(r.action.Stderr, "output too large: stderr is") {
		t.Errorf("stderr over the cap: %d %+v", r.status, r.action)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strings.Repeat("y", 1000))) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	allowed := netguard.New(netguard.Options{MaxBodyBytes: 64, AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}})
	defer allowed.CloseIdleConnections()
	s, root = exampleSite(t, func(o *Options) { o.Net = allowed; o.MaxOutput = 64 })
	writePage(t, root, "net.md", "---\ntools:\n  - [curl]\n---\n")
	if r, _ := postPrefer(t, serve(s), "/net", "", ActionRequest{Command: []string{"curl", srv.URL}}); r.status != 200 || len(r.action.Stdout) != 64 || !strings.Contains(r.action.Stderr, "cut at 64 bytes") {
		t.Errorf("curl, default: %d %+v", r.status, r.action)
	}
	if r, _ := postPrefer(t, serve(s), "/net", "handling=strict", ActionRequest{Command: []string{"curl", srv.URL}}); r.status != 413 || r.action.Stdout != "" || !strings.Contains(r.action.Stderr, "output too large: the response body is over the limit of 64 bytes") {
		t.Errorf("curl, strict: %d %+v", r.status, r.action)
	}
}

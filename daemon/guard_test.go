package daemon

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// guardEndpoints are the daemon's work endpoints, each with a request that
// succeeds when the guard lets it through, plus /test-work: a helper
// endpoint registered with handleWork the way a future endpoint would be.
var guardEndpoints = []struct {
	path   string
	method string
	body   string
	header map[string]string
	ok     int // status of an admitted request
}{
	{"/mcp", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		map[string]string{"Content-Type": "application/json", "Accept": "application/json"}, http.StatusOK},
	{"/ssh", http.MethodGet, "",
		map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, http.StatusSwitchingProtocols},
	{"/metrics", http.MethodGet, "", nil, http.StatusOK},
	{"/tools", http.MethodGet, "", nil, http.StatusOK},
	{"/execute", http.MethodPost, `{"tool_name":"none"}`, nil, http.StatusNotFound},
	{"/gateway", http.MethodGet, "",
		map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}, http.StatusSwitchingProtocols},
	{"/test-work", http.MethodGet, "", nil, http.StatusTeapot},
}

// guardRequest sends one endpoint's request to the daemon at base with the
// given Host and Origin ("" = the default Host, no Origin) and returns the
// status and body; an upgraded connection is closed at once.
func guardRequest(t *testing.T, base, path, method, body string, header map[string]string, host, origin string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestGuardOnEveryWorkEndpoint runs each Origin/Host rule against every
// endpoint that does work. The first case is DNS rebinding: a page on
// evil.example, resolved to 127.0.0.1, sends its own name as Host and
// Origin.
func TestGuardOnEveryWorkEndpoint(t *testing.T) {
	cases := []struct {
		name    string
		token   string
		origins []string
		host    string // "{port}" is replaced by the daemon's port
		origin  string
		refused bool
		want    string // in the refusal's body
	}{
		{name: "dns rebinding, no token", host: "evil.example:{port}", origin: "http://evil.example:{port}", refused: true, want: "Forbidden origin"},
		{name: "foreign origin, loopback host", origin: "http://evil.example", refused: true, want: "Forbidden origin"},
		{name: "null origin", origin: "null", refused: true, want: "is not allowed to use"},
		{name: "non-loopback host, no origin, no token", host: "evil.example:{port}", refused: true, want: "Forbidden host"},
		{name: "loopback origin", origin: "http://localhost:{port}"},
		{name: "loopback IP origin on another port", origin: "http://127.0.0.1:5173"},
		{name: "allowed origin", origins: []string{"https://app.example"}, origin: "https://app.example"},
		{name: "any origin", origins: []string{"*"}, origin: "https://app.example"},
		{name: "no origin, loopback host"},
		{name: "reverse proxy host with a token", token: "s3cret", host: "api.example.com"},
		{name: "foreign origin with a token", token: "s3cret", origin: "http://evil.example", refused: true, want: "Forbidden origin"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t)
			c.AuthToken = tc.token
			c.AllowedOrigins = tc.origins
			r := start(t, c, func(d *Daemon) {
				d.handleWork("/test-work", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.WriteHeader(http.StatusTeapot)
				}))
			})
			u, _ := url.Parse(r.url)
			host := strings.ReplaceAll(tc.host, "{port}", u.Port())
			origin := strings.ReplaceAll(tc.origin, "{port}", u.Port())
			for _, ep := range guardEndpoints {
				header := map[string]string{}
				for k, v := range ep.header {
					header[k] = v
				}
				if tc.token != "" {
					header["Authorization"] = "Bearer " + tc.token
				}
				code, body := guardRequest(t, r.url, ep.path, ep.method, ep.body, header, host, origin)
				switch {
				case tc.refused && (code != http.StatusForbidden || !strings.Contains(body, tc.want)):
					t.Errorf("%s %s: %d %.200q, want 403 with %q", ep.method, ep.path, code, body, tc.want)
				case !tc.refused && code != ep.ok:
					t.Errorf("%s %s: %d %.200q, want %d", ep.method, ep.path, code, body, ep.ok)
				}
			}
			// /health is the liveness probe: it does no work and answers
			// whatever name it is reached by.
			if code, body := guardRequest(t, r.url, "/health", http.MethodGet, "", nil, host, origin); code != http.StatusOK {
				t.Errorf("GET /health: %d %q, want 200", code, body)
			}
		})
	}
}

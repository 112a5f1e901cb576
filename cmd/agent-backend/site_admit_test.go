package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// startSiteServe runs `site serve` on a copy of the example site with
// args added, and returns its base URL once it answers.
func startSiteServe(t *testing.T, args ...string) string {
	t.Helper()
	siteDir := t.TempDir()
	if err := os.CopyFS(siteDir, os.DirFS("../../examples/site")); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	url, _ := startSite(t, siteDir, port, append([]string{"site", "serve", siteDir, "--port", fmt.Sprint(port), "--isolation", "software", "--timeout", "5"}, args...)...)
	return url
}

// siteRequest is one request to a site, relative to where it is mounted.
type siteRequest struct {
	method, path, body string
	ctype              string // Content-Type; "" sends none
	origin, host       string // "" sends none, and the URL's host
	token, scope       string // bearer token, X-Scope-Path
}

// siteAnswer is what the admission tests compare: the status, the
// refusal's title (the "error" field), WWW-Authenticate, and the body of
// an answer that is not a refusal.
type siteAnswer struct {
	status      int
	title, auth string
	body        string
}

func askSite(t *testing.T, base string, rq siteRequest) siteAnswer {
	t.Helper()
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	req, err := http.NewRequest(rq.method, base+rq.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if rq.ctype != "" {
		req.Header.Set("Content-Type", rq.ctype)
	}
	if rq.origin != "" {
		req.Header.Set("Origin", rq.origin)
	}
	if rq.host != "" {
		req.Host = rq.host
	}
	if rq.token != "" {
		req.Header.Set("Authorization", "Bearer "+rq.token)
	}
	if rq.scope != "" {
		req.Header.Set("X-Scope-Path", rq.scope)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := siteAnswer{status: resp.StatusCode, auth: resp.Header.Get("WWW-Authenticate"), body: string(b)}
	var refusal struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &refusal) == nil && refusal.Error != "" {
		a.title, a.body = refusal.Error, "" // a refusal's message names the path, which differs by mount
	}
	return a
}

const siteCmd = `{"command":["grep","-c","IN","cities.csv"]}`

// TestSiteServeAdmission: `site serve` admits a request through the
// daemon's rules. A page in the user's browser cannot run the site's
// commands with a cross-site "simple" POST (text/plain needs no CORS
// preflight): its Origin is refused (403), and a body that is not JSON is
// 415 even from an allowed origin. A DNS-rebinding page (Host:
// evil.example on a loopback address) is refused without a token, and
// with --token-file a request without the token is 401.
func TestSiteServeAdmission(t *testing.T) {
	url := startSiteServe(t, "--allowed-origins", "http://app.example")
	for _, tc := range []struct {
		name  string
		rq    siteRequest
		want  int
		title string
	}{
		{"cross-site text/plain POST", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "text/plain", origin: "http://evil.example"}, 403, "Forbidden origin"},
		{"cross-site form POST", siteRequest{method: "POST", path: "/data", body: "command=ls", ctype: "application/x-www-form-urlencoded", origin: "http://evil.example"}, 403, "Forbidden origin"},
		{"cross-site GET", siteRequest{method: "GET", path: "/guide", origin: "http://evil.example"}, 403, "Forbidden origin"},
		{"text/plain POST from an allowed origin", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "text/plain", origin: "http://app.example"}, 415, "Unsupported Media Type"},
		{"text/plain POST from a loopback origin", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "text/plain;charset=UTF-8", origin: "http://localhost:8000"}, 415, "Unsupported Media Type"},
		{"POST without a Content-Type", siteRequest{method: "POST", path: "/data", body: siteCmd}, 415, "Unsupported Media Type"},
		{"rebinding GET", siteRequest{method: "GET", path: "/guide", host: "evil.example"}, 403, "Forbidden host"},
		{"rebinding POST", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "application/json", host: "evil.example:8000"}, 403, "Forbidden host"},
		{"JSON POST from an allowed origin", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "application/json", origin: "http://app.example"}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a := askSite(t, url, tc.rq); a.status != tc.want || a.title != tc.title {
				t.Errorf("%d %q; want %d %q", a.status, a.title, tc.want, tc.title)
			}
		})
	}

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("site-secret-7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url = startSiteServe(t, "--token-file", tokenFile)
	for _, tc := range []struct {
		name string
		rq   siteRequest
		want int
	}{
		{"GET without the token", siteRequest{method: "GET", path: "/guide"}, 401},
		{"POST without the token", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "application/json"}, 401},
		{"POST with another token", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "application/json", token: "site-secret-8"}, 401},
		{"rebinding GET without the token", siteRequest{method: "GET", path: "/guide", host: "evil.example"}, 401},
		{"GET with the token", siteRequest{method: "GET", path: "/guide", token: "site-secret-7"}, 200},
		{"POST with the token", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "application/json", token: "site-secret-7"}, 200},
		{"text/plain POST with the token", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "text/plain", token: "site-secret-7"}, 415},
	} {
		t.Run("token/"+tc.name, func(t *testing.T) {
			a := askSite(t, url, tc.rq)
			if a.status != tc.want {
				t.Errorf("%d %q; want %d", a.status, a.title, tc.want)
			}
			if tc.want == 401 && a.auth != `Bearer realm="agent-backend"` {
				t.Errorf("401 without WWW-Authenticate: Bearer (%q)", a.auth)
			}
		})
	}

	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(t.TempDir(), "missing"), "--token-file"},
		{empty, "is empty"},
	} {
		if _, errOut, code := run(t, nil, "site", "serve", "../../examples/site", "--token-file", tc.file, "--port", fmt.Sprint(freePort(t))); code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("--token-file %s: exit %d, %q; want 1 and %q", tc.file, code, errOut, tc.want)
		}
	}
}

// TestSiteAdmissionSameOnDaemonAndSiteServe: the daemon's /site/ and
// `site serve` admit a request through the same code, so they answer a
// table of hostile requests (foreign origins, rebinding hosts, bodies that
// are not JSON, missing and wrong tokens, a bad scope) identically, with
// and without a token.
func TestSiteAdmissionSameOnDaemonAndSiteServe(t *testing.T) {
	const token = "same-token-3"
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	siteDir := t.TempDir()
	if err := os.CopyFS(siteDir, os.DirFS("../../examples/site")); err != nil {
		t.Fatal(err)
	}
	const allowed = "http://app.example"
	cmdJSON := func(rq siteRequest) siteRequest {
		rq.method, rq.path, rq.body = "POST", "/data", siteCmd
		if rq.ctype == "" {
			rq.ctype = "application/json"
		}
		return rq
	}
	for _, mode := range []struct {
		name         string
		daemon, site []string
		tok          string
	}{
		{"no token", nil, nil, ""},
		{"token", []string{"--auth-token-file", tokenFile}, []string{"--token-file", tokenFile}, token},
	} {
		t.Run(mode.name, func(t *testing.T) {
			d := startDaemon(t, append([]string{"--root", t.TempDir(), "--site", siteDir, "--allowed-origins", allowed}, mode.daemon...)...)
			s := startSiteServe(t, append([]string{"--allowed-origins", allowed}, mode.site...)...)
			tok := mode.tok
			for _, tc := range []struct {
				name string
				rq   siteRequest
				want int // without a token configured, and with one unless tokW is set
				tokW int
			}{
				{"foreign origin, text/plain POST", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "text/plain", origin: "http://evil.example", token: tok}, 403, 0},
				{"foreign origin, JSON POST", cmdJSON(siteRequest{origin: "https://evil.example", token: tok}), 403, 0},
				{"foreign origin, GET", siteRequest{method: "GET", path: "/guide", origin: "http://evil.example", token: tok}, 403, 0},
				{"null origin", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "text/plain", origin: "null", token: tok}, 403, 0},
				{"allowed origin, text/plain POST", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "text/plain", origin: allowed, token: tok}, 415, 0},
				{"form POST", siteRequest{method: "POST", path: "/data", body: "command=ls", ctype: "application/x-www-form-urlencoded", token: tok}, 415, 0},
				{"multipart POST", siteRequest{method: "POST", path: "/data", body: "--x--", ctype: "multipart/form-data; boundary=x", token: tok}, 415, 0},
				{"POST without a Content-Type", siteRequest{method: "POST", path: "/data", body: siteCmd, token: tok}, 415, 0},
				{"POST of JSON under another type", siteRequest{method: "POST", path: "/data", body: siteCmd, ctype: "application/jsonx", token: tok}, 415, 0},
				{"rebinding GET, no token", siteRequest{method: "GET", path: "/guide", host: "evil.example"}, 403, 401},
				{"rebinding POST, no token", cmdJSON(siteRequest{host: "evil.example:80"}), 403, 401},
				{"rebinding GET with the token", siteRequest{method: "GET", path: "/guide", host: "evil.example", token: tok}, 403, 200},
				{"no token", siteRequest{method: "GET", path: "/guide"}, 200, 401},
				{"no token, POST", cmdJSON(siteRequest{}), 200, 401},
				{"another token", cmdJSON(siteRequest{token: "same-token-4"}), 200, 401},
				{"scope with ..", cmdJSON(siteRequest{token: tok, scope: "../x"}), 400, 0},
				{"PUT", siteRequest{method: "PUT", path: "/", body: siteCmd, ctype: "application/json", token: tok}, 405, 0},
				{"JSON POST from an allowed origin", cmdJSON(siteRequest{origin: allowed, token: tok}), 200, 0},
				{"JSON POST with a charset", cmdJSON(siteRequest{ctype: "application/json; charset=utf-8", token: tok}), 200, 0},
				{"GET from a loopback origin", siteRequest{method: "GET", path: "/guide", origin: "http://127.0.0.1:9", token: tok}, 200, 0},
			} {
				t.Run(tc.name, func(t *testing.T) {
					rq := tc.rq
					want := tc.want
					if tok != "" && tc.tokW != 0 {
						want = tc.tokW
					}
					fromDaemon := askSite(t, d.url+"/site", rq)
					fromSite := askSite(t, s, rq)
					if fromDaemon.status != want {
						t.Errorf("daemon /site/: %d %q; want %d", fromDaemon.status, fromDaemon.title, want)
					}
					if fromSite != fromDaemon {
						t.Errorf("site serve answered %+v; the daemon's /site/ %+v", fromSite, fromDaemon)
					}
				})
			}
		})
	}
}

package mcpbridge

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// This file: the bridge played against a hostile daemon, or whatever
// answers in its place (docs/security.md, "Attack review: the REST face,
// the client and the bridge").

// TestAttackBridgeRedirects: a daemon that redirects the POST (307 keeps
// the body) to another port or host name, or to itself, gets no request
// followed: the message, the session id and the token go to the URL given
// only, and the request is answered with the redirect as an HTTP error.
// Before the fix net/http followed it, re-sending the message (a tool
// call's arguments) and, to another port of the same host, the token.
func TestAttackBridgeRedirects(t *testing.T) {
	var elsewhere, leaked atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		if r.Header.Get("Authorization") != "" {
			leaked.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer other.Close()
	var hits atomic.Int32
	var target string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, target, http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	for _, to := range []string{other.URL + "/mcp", strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + "/mcp", srv.URL + "/mcp"} {
		target = to
		hits.Store(0)
		var out bytes.Buffer
		in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"content":"secret"}}}` + "\n"
		if err := Run(context.Background(), Options{URL: srv.URL + "/mcp", Token: "tok"}, strings.NewReader(in), &out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), `"id":1`) || !strings.Contains(out.String(), "307") {
			t.Errorf("redirect to %s: answer %s", to, out.String())
		}
		if n := hits.Load(); n != 1 {
			t.Errorf("redirect to %s: %d requests to the daemon, want 1", to, n)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("%d requests followed a redirect, %d of them with the token", n, leaked.Load())
	}
}

// TestAttackBridgeHostileAnswers: an answer past MaxMessage (a JSON body
// or one event, here 4 MiB against a 1 MiB bound, standing for one that
// never ends) is read to the bound and answered with an error for the
// request's id; a cookie the daemon sets is never sent back (no jar); an
// answer that is not JSON is an error for the id; an answer with another
// id is delivered as it is (the bridge knows nothing of MCP's methods: the
// client matches ids) and the request is not answered twice.
func TestAttackBridgeHostileAnswers(t *testing.T) {
	const bound = 1 << 20
	var read atomic.Int64
	var cookies atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") != "" {
			cookies.Add(1)
		}
		http.SetCookie(w, &http.Cookie{Name: "s", Value: "planted"})
		body, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Contains(body, []byte(`"huge"`)):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"pad":"`)
			chunk := []byte(strings.Repeat("a", 64<<10))
			for range 64 {
				n, err := w.Write(chunk)
				read.Add(int64(n))
				if err != nil {
					return
				}
			}
			io.WriteString(w, `"}}`)
		case bytes.Contains(body, []byte(`"stream"`)):
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: ")
			chunk := []byte(strings.Repeat("a", 64<<10))
			for range 64 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case bytes.Contains(body, []byte(`"garbage"`)):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":`)
		case bytes.Contains(body, []byte(`"wrongid"`)):
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":999,"result":{}}`)
		}
	}))
	defer srv.Close()
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"huge"}`,
		`{"jsonrpc":"2.0","id":2,"method":"stream"}`,
		`{"jsonrpc":"2.0","id":3,"method":"garbage"}`,
		`{"jsonrpc":"2.0","id":4,"method":"wrongid"}`,
		"",
	}, "\n")
	var out bytes.Buffer
	if err := Run(context.Background(), Options{URL: srv.URL + "/mcp", MaxMessage: bound, MaxInFlight: 1}, strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines: %s", len(lines), out.String())
	}
	for i, want := range [][2]string{{`"id":1`, `"error"`}, {`"id":2`, `"error"`}, {`"id":3`, `"error"`}, {`"id":999`, `"result"`}} {
		if !strings.Contains(lines[i], want[0]) || !strings.Contains(lines[i], want[1]) {
			t.Errorf("line %d: %.200s, want %s and %s", i+1, lines[i], want[0], want[1])
		}
	}
	if !strings.Contains(lines[0], "longer than") || !strings.Contains(lines[1], "longer than") {
		t.Errorf("the bound is not named: %.200s / %.200s", lines[0], lines[1])
	}
	if n := cookies.Load(); n != 0 {
		t.Errorf("%d requests carried the daemon's cookie", n)
	}
}

package mcpbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// rotatingServer stands for a daemon whose token is rotated: it admits
// one token at a time (401 with the daemon's JSON refusal, before reading
// the body, for any other) and counts the requests each id sent and the
// calls it ran. A call whose method is "boom" runs and then fails with 500.
type rotatingServer struct {
	*httptest.Server
	mu    sync.Mutex
	token string
	sent  map[string]int      // requests per id, refused ones included
	ran   map[string]int      // calls run per id
	auth  map[string][]string // the Authorization of each request per id
}

func newRotatingServer(t *testing.T, token string) *rotatingServer {
	s := &rotatingServer{token: token, sent: map[string]int{}, ran: map[string]int{}, auth: map[string][]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		id := string(m.ID)
		s.mu.Lock()
		s.sent[id]++
		s.auth[id] = append(s.auth[id], r.Header.Get("Authorization"))
		ok := r.Header.Get("Authorization") == "Bearer "+s.token
		if ok && r.Method == http.MethodPost {
			s.ran[id]++
		}
		s.mu.Unlock()
		switch {
		case !ok:
			w.Header().Set("WWW-Authenticate", `Bearer realm="agent-backend"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"Unauthorized","message":"Invalid or missing authentication token"}`)
		case r.Method != http.MethodPost:
		case m.Method == "boom":
			http.Error(w, "the call ran and failed", http.StatusInternalServerError)
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"ran":true}}`)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *rotatingServer) rotate(token string) {
	s.mu.Lock()
	s.token = token
	s.mu.Unlock()
}

func (s *rotatingServer) counts(id string) (sent, ran int, auth []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent[id], s.ran[id], append([]string(nil), s.auth[id]...)
}

// bridgeSession runs a bridge to srv with opts and returns a function that
// sends lines and waits for as many answers, keyed by id.
func bridgeSession(t *testing.T, opts Options) func(lines ...string) map[string]string {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(context.Background(), opts, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() {
		inW.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	answers := bufioLines(outR)
	return func(lines ...string) map[string]string {
		t.Helper()
		for _, l := range lines {
			io.WriteString(inW, l+"\n")
		}
		got := map[string]string{}
		for range lines {
			a, ok := <-answers
			if !ok {
				t.Fatal("the bridge's stdout ended")
			}
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			_ = json.Unmarshal([]byte(a), &m)
			got[string(m.ID)] = a
		}
		return got
	}
}

func call(id int, method string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{}}`, id, method)
}

func writeToken(t *testing.T, file, tok string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBridgeFollowsRotatedTokenFile: a bridge given --token-file goes on
// across a rotation. While the daemon still admits the old token, a file
// that already holds the new one changes nothing (the bridge reads it only
// on a refusal), and a call that ran and failed is not sent again. Once
// the daemon admits only the new token, the first call is refused (401),
// the file is read again and the call is sent once more with the new
// token: it runs once, and the calls after it go with the new token at
// once; calls refused together (a second rotation) each run once too.
func TestBridgeFollowsRotatedTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	writeToken(t, file, "old-token")
	srv := newRotatingServer(t, "old-token")
	send := bridgeSession(t, Options{URL: srv.URL, Token: "old-token", TokenFile: file})

	if got := send(call(1, "tools/call"))["1"]; !strings.Contains(got, `"ran":true`) {
		t.Fatalf("call 1 before any rotation: %s", got)
	}
	// The file changes; the daemon has not been told yet (no SIGHUP).
	writeToken(t, file, "new-token")
	if got := send(call(2, "boom"))["2"]; !strings.Contains(got, "500") {
		t.Errorf("call 2, which ran and failed: %s; want its 500", got)
	}
	if sent, ran, auth := srv.counts("2"); sent != 1 || ran != 1 || auth[0] != "Bearer old-token" {
		t.Errorf("call 2: sent %d times, ran %d, with %q; want sent once with the old token (the daemon still admits it), run once", sent, ran, auth)
	}

	// SIGHUP: the daemon admits the new token only.
	srv.rotate("new-token")
	if got := send(call(3, "tools/call"))["3"]; !strings.Contains(got, `"ran":true`) {
		t.Fatalf("call 3, the first after the rotation: %s; want its result", got)
	}
	if sent, ran, auth := srv.counts("3"); sent != 2 || ran != 1 || strings.Join(auth, ",") != "Bearer old-token,Bearer new-token" {
		t.Errorf("call 3: sent %d times (%q), ran %d; want refused with the old token, then run once with the new one", sent, auth, ran)
	}
	if got := send(call(4, "tools/call"))["4"]; !strings.Contains(got, `"ran":true`) {
		t.Fatalf("call 4: %s", got)
	}
	if sent, _, auth := srv.counts("4"); sent != 1 || auth[0] != "Bearer new-token" {
		t.Errorf("call 4: sent %d times with %q; want once, with the new token", sent, auth)
	}

	// A second rotation meets several calls at once.
	writeToken(t, file, "newer-token")
	srv.rotate("newer-token")
	var lines []string
	for id := 10; id < 16; id++ {
		lines = append(lines, call(id, "tools/call"))
	}
	got := send(lines...)
	for id := 10; id < 16; id++ {
		key := fmt.Sprint(id)
		if !strings.Contains(got[key], `"ran":true`) {
			t.Errorf("call %d after the second rotation: %s", id, got[key])
		}
		if sent, ran, auth := srv.counts(key); ran != 1 || sent > 2 || auth[len(auth)-1] != "Bearer newer-token" {
			t.Errorf("call %d: sent %d times (%q), ran %d; want run once, with the newest token, after at most one refusal", id, sent, auth, ran)
		}
	}
}

// TestBridgeRefusedTokenFileSaysWhy: a refusal the file cannot mend is
// answered as before, 401 with the daemon's message, after one request
// and one reading of the file, and the error names the file and what it
// held: the same token as refused, nothing (empty), no file at all. A
// file that holds another token the daemon refuses too is tried once:
// two requests, never more.
func TestBridgeRefusedTokenFileSaysWhy(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	writeToken(t, file, "wrong-token")
	srv := newRotatingServer(t, "the-daemons-token")
	send := bridgeSession(t, Options{URL: srv.URL, TokenFile: file, MaxInFlight: 1})

	for _, tc := range []struct {
		id       int
		change   func()
		want     []string
		requests int
	}{
		{1, func() {}, []string{"401 Unauthorized", "Invalid or missing authentication token", "--token-file " + file, "read again after the refusal"}, 1},
		{2, func() { writeToken(t, file, "") }, []string{"401 Unauthorized", "--token-file " + file + " is empty"}, 1},
		{3, func() { os.Remove(file) }, []string{"401 Unauthorized", "--token-file cannot be read", file}, 1},
		{4, func() { writeToken(t, file, "another-wrong-token") }, []string{"401 Unauthorized", "--token-file " + file + " held, and then the one it holds now"}, 2},
		{5, func() {}, []string{"401 Unauthorized", "--token-file " + file, "read again after the refusal"}, 1},
	} {
		tc.change()
		key := fmt.Sprint(tc.id)
		got := send(call(tc.id, "tools/call"))[key]
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("call %d: %s; want %q in the error", tc.id, got, w)
			}
		}
		if sent, ran, auth := srv.counts(key); sent != tc.requests || ran != 0 {
			t.Errorf("call %d: sent %d times (%q), ran %d; want %d requests, none run", tc.id, sent, auth, ran, tc.requests)
		}
	}
}

// TestBridgeSessionEndedSaysSo: a daemon with --mcp-sessions ends a
// session when its token is rotated (or it idles out), and answers the
// session's next request 404; the error says the session ended rather
// than that the URL is wrong (a 404 without a session still says that).
func TestBridgeSessionEndedSaysSo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(body), `"initialize"`):
			w.Header().Set("Mcp-Session-Id", "s-1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18"}}`)
		default:
			http.Error(w, "session not found", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	send := bridgeSession(t, Options{URL: srv.URL + "/mcp", MaxInFlight: 1})
	if got := send(call(1, "initialize"))["1"]; !strings.Contains(got, `"result"`) {
		t.Fatalf("initialize: %s", got)
	}
	got := send(call(2, "tools/call"))["2"]
	if !strings.Contains(got, "404 Not Found: session not found (the daemon no longer knows this MCP session") || strings.Contains(got, "should end in /mcp") {
		t.Errorf("a request of an ended session: %s; want the session named as ended", got)
	}

	// No session: the 404 is a wrong URL.
	var out strings.Builder
	if err := Run(context.Background(), Options{URL: srv.URL + "/mpc"}, strings.NewReader(call(3, "tools/list")+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "(the URL should end in /mcp)") {
		t.Errorf("a 404 outside a session: %s; want the URL's hint", got)
	}
}

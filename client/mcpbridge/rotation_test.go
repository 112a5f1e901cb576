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
	"time"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
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
// sends lines and waits for an answer to each request (a method and an
// id), keyed by id.
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
		for _, l := range lines {
			if !strings.Contains(l, `"id"`) || !strings.Contains(l, `"method"`) {
				continue // a notification or a response: no answer
			}
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

// TestBridgeRenewsEndedSession: a daemon with --mcp-sessions ends a
// session when its token is rotated (or it idles out) and answers the
// session's next request 404 before running it. The bridge opens a new
// session as the client opened the first (its initialize and
// notifications/initialized sent again, the answer not passed on) and
// sends the request once more in it: it runs once, and requests that met
// the 404 together open one session. When no new session opens, the
// request is answered with the 404, saying the session ended, after one
// try; a 404 outside a session still says the URL is wrong.
func TestBridgeRenewsEndedSession(t *testing.T) {
	var mu sync.Mutex
	sessions := map[string]bool{}
	opened, initialized, sent := 0, 0, map[string]int{}
	ran := map[string]int{}
	refuseInit := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		mu.Lock()
		defer mu.Unlock()
		sent[string(m.ID)]++
		sid := r.Header.Get("Mcp-Session-Id")
		switch {
		case r.Method == http.MethodDelete:
		case m.Method == "initialize" && refuseInit:
			http.Error(w, "no more sessions", http.StatusServiceUnavailable)
		case m.Method == "initialize":
			if sid != "" {
				http.Error(w, "initialize within a session", http.StatusBadRequest)
				return
			}
			opened++
			id := fmt.Sprintf("s-%d", opened)
			sessions[id] = true
			w.Header().Set("Mcp-Session-Id", id)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-06-18"}}`)
		case !sessions[sid]:
			http.Error(w, "session not found", http.StatusNotFound)
		case m.Method == "notifications/initialized":
			initialized++
			w.WriteHeader(http.StatusAccepted)
		default:
			ran[string(m.ID)]++
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"session":"`+sid+`"}}`)
		}
	}))
	defer srv.Close()
	endSessions := func() {
		mu.Lock()
		clear(sessions)
		mu.Unlock()
	}
	logged := &syncbuf.Buffer{}
	send := bridgeSession(t, Options{URL: srv.URL + "/mcp", Errors: logged})
	if got := send(call(1, "initialize"))["1"]; !strings.Contains(got, `"result"`) {
		t.Fatalf("initialize: %s", got)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) { // a hang guard
		mu.Lock()
		n := initialized
		mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the notification did not reach the server")
		}
	}
	if got := send(call(2, "tools/call"))["2"]; !strings.Contains(got, `"session":"s-1"`) {
		t.Fatalf("call 2: %s", got)
	}

	endSessions()
	var lines []string
	for id := 3; id < 7; id++ {
		lines = append(lines, call(id, "tools/call"))
	}
	got := send(lines...)
	mu.Lock()
	retried := 0
	for id := 3; id < 7; id++ {
		key := fmt.Sprint(id)
		if !strings.Contains(got[key], `"session":"s-2"`) || ran[key] != 1 || sent[key] > 2 {
			t.Errorf("call %d after its session ended: %s, sent %d times, ran %d; want it run once in the new session s-2, after at most one 404", id, got[key], sent[key], ran[key])
		}
		if sent[key] == 2 {
			retried++
		}
	}
	if retried == 0 {
		t.Error("no call met the 404 of the ended session")
	}
	if opened != 2 || initialized != 2 {
		t.Errorf("%d sessions opened, %d notifications/initialized; want 2 and 2 (one new session for the requests that met the 404 together)", opened, initialized)
	}
	mu.Unlock()

	// A response to a request of the ended session is not sent again
	// in a new one: nobody there asked.
	endSessions()
	send(`{"jsonrpc":"2.0","id":"srv-9","result":{}}`)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logged.String(), "404"); time.Sleep(time.Millisecond) { // a hang guard
		if time.Now().After(deadline) {
			t.Fatalf("the response's 404 was not logged: %q", logged.String())
		}
	}
	mu.Lock()
	if sent[`"srv-9"`] != 1 || opened != 2 {
		t.Errorf("a response met the 404: sent %d times, %d sessions opened; want sent once and no new session", sent[`"srv-9"`], opened)
	}
	refuseInit = true
	mu.Unlock()

	endSessions()
	got2 := send(call(7, "tools/call"))["7"]
	if !strings.Contains(got2, "404 Not Found: session not found (the daemon no longer knows this MCP session") || !strings.Contains(got2, "opening a new MCP session: POST "+srv.URL+"/mcp: initialize answered 503") {
		t.Errorf("a request whose session ended and could not be opened again: %s; want the 404 naming the session", got2)
	}
	mu.Lock()
	if sent["7"] != 1 || ran["7"] != 0 {
		t.Errorf("call 7: sent %d times, ran %d; want sent once, not run", sent["7"], ran["7"])
	}
	mu.Unlock()

	// No session: the 404 is a wrong URL.
	var out strings.Builder
	if err := Run(context.Background(), Options{URL: srv.URL + "/mpc"}, strings.NewReader(call(8, "tools/list")+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "(the URL should end in /mcp)") {
		t.Errorf("a 404 outside a session: %s; want the URL's hint", got)
	}
}

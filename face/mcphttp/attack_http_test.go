package mcphttp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

// u1Tokens is a token file with one token, "u1-token", named u1 and bound
// to users/u1.
func u1Tokens(t *testing.T) *atomic.Pointer[httpguard.TokenSet] {
	sum := sha256.Sum256([]byte("u1-token"))
	set, err := httpguard.ParseTokens("tokens.json", []byte(`{"tokens":[{"name":"u1","sha256":"`+hex.EncodeToString(sum[:])+`","scope":"users/u1"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := new(atomic.Pointer[httpguard.TokenSet])
	p.Store(set)
	return p
}

// roTokens is a token file with one read-only token, "ro-token".
func roTokens(t *testing.T) *atomic.Pointer[httpguard.TokenSet] {
	sum := sha256.Sum256([]byte("ro-token"))
	set, err := httpguard.ParseTokens("tokens.json", []byte(`{"tokens":[{"name":"ro","sha256":"`+hex.EncodeToString(sum[:])+`","readOnly":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := new(atomic.Pointer[httpguard.TokenSet])
	p.Store(set)
	return p
}

// sessionPost opens a session (initialize, then notifications/initialized)
// on e with hdr and returns a function that POSTs a body in it, and the
// session's id; the session is ended (DELETE) when the test ends.
func sessionPost(t *testing.T, e *env, hdr map[string]string) (func(body string) (int, string), string) {
	t.Helper()
	resp, body := rawPost(t, e.url(), "POST", initBody, hdr)
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatalf("initialize: %d %s; no Mcp-Session-Id", resp.StatusCode, body)
	}
	h := map[string]string{"Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-06-18"}
	for k, v := range hdr {
		h[k] = v
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest("DELETE", e.url(), nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	post := func(body string) (int, string) {
		t.Helper()
		resp, b := rawPost(t, e.url(), "POST", body, h)
		return resp.StatusCode, b
	}
	post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return post, id
}

// TestSessionReplyLimitPerRequest: with --mcp-sessions, --max-reply-bytes
// bounds each HTTP reply, as it does without sessions; it is not one budget
// for the whole session (the initialize request's), which would refuse every
// result once the session's replies added up to the limit.
func TestSessionReplyLimitPerRequest(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Sessions, o.MaxReplyBytes = true, 4096 })
	post, _ := sessionPost(t, e, nil)
	big := strings.Repeat("x", 1500)
	if code, body := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"w.txt","content":"` + big + `"}}}`); code != http.StatusOK || !strings.Contains(body, "Successfully wrote") {
		t.Fatalf("write: %d %s", code, body)
	}
	for i := range 6 {
		code, body := post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"w.txt"}}}`)
		if code != http.StatusOK || !strings.Contains(body, big) {
			t.Fatalf("read %d of a 1500-byte file in one session, reply limit 4096: %d %.300s", i, code, body)
		}
	}
	// One reply is still bounded: a result larger than the limit is refused.
	if code, body := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"w.txt","content":"` + big + `\n` + big + `\n` + big + `"}}}`); code != http.StatusOK || !strings.Contains(body, "Successfully wrote") {
		t.Fatalf("write: %d %s", code, body)
	}
	if code, body := post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"w.txt"}}}`); code != http.StatusOK || strings.Contains(body, big) || !strings.Contains(body, "--max-reply-bytes") {
		t.Errorf("a read of three 1500-byte lines under a 4096-byte reply limit: %d %.300s; want the reply-limit error", code, body)
	}
}

// TestReadOnlyTokenOnEveryPath: a read-only token reaches no writing tool
// and no command by any route into the SDK or around it: the fast path
// (JSON and SSE), the SDK's path (a progress token, a key in another case,
// a repeated params key, a batch), and its own session; one the daemon's
// token opened does not let it in.
func TestReadOnlyTokenOnEveryPath(t *testing.T) {
	write := func(id int, file string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"write_file","arguments":{"path":%q,"content":"x"}}}`, id, file)
	}
	cases := []struct{ name, body, accept, version string }{
		{"fast json", write(1, "f1.txt"), "application/json", ""},
		{"fast sse", write(2, "f2.txt"), "text/event-stream", ""},
		{"sdk progress", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"f3.txt","content":"x"},"_meta":{"progressToken":{"a":[1,2]}}}}`, "application/json, text/event-stream", ""},
		{"sdk key case", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"f4.txt","content":"x"}},"Params":{}}`, "application/json", ""},
		{"repeated params", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_directory","arguments":{"path":"."}},"params":{"name":"write_file","arguments":{"path":"f5.txt","content":"x"}}}`, "application/json", ""},
		{"batch", "[" + write(6, "f6.txt") + "," + `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"exec","arguments":{"command":"touch f7.txt"}}}` + "]", "application/json", "2025-03-26"},
		{"exec", `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"exec","arguments":{"command":"touch f8.txt"}}}`, "application/json", ""},
		{"protocol 2026", `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"f9.txt","content":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, "application/json, text/event-stream", "2026-07-28"},
	}
	e := newEnv(t, func(o *Options) { o.AuthToken, o.Tokens = "daemon-token", roTokens(t) })
	for _, c := range cases {
		hdr := map[string]string{"Authorization": "Bearer ro-token", "Accept": c.accept}
		if c.version != "" {
			hdr["MCP-Protocol-Version"] = c.version
		}
		resp, body := rawPost(t, e.url(), "POST", c.body, hdr)
		if resp.StatusCode == http.StatusOK && !strings.Contains(body, "read-only") {
			t.Errorf("%s: %d %.300s; want the read-only refusal", c.name, resp.StatusCode, body)
		}
	}
	s := newEnv(t, func(o *Options) { o.AuthToken, o.Tokens, o.Sessions = "daemon-token", roTokens(t), true })
	own, _ := sessionPost(t, s, map[string]string{"Authorization": "Bearer ro-token"})
	if code, body := own(write(10, "f10.txt")); code != http.StatusOK || !strings.Contains(body, "read-only") {
		t.Errorf("the read-only token's own session: %d %.300s", code, body)
	}
	_, id := sessionPost(t, s, map[string]string{"Authorization": "Bearer daemon-token"})
	resp, body := rawPost(t, s.url(), "POST", write(11, "f11.txt"), map[string]string{
		"Authorization": "Bearer ro-token", "Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-06-18"})
	if resp.StatusCode != http.StatusForbidden { // TestSessionBoundToItsToken
		t.Errorf("the daemon token's session, with the read-only token: %d %.300s", resp.StatusCode, body)
	}
	for _, root := range []string{e.root, s.root} {
		for i := 1; i <= 11; i++ {
			if _, err := os.Stat(filepath.Join(root, fmt.Sprintf("f%d.txt", i))); err == nil {
				t.Errorf("f%d.txt was written with the read-only token", i)
			}
		}
	}
}

// TestCancelReachesOnlyItsOwnRequests: a notifications/cancelled naming the
// id of another client's running call (the same id, in another stateless
// request or in another session) lets it run to its end.
func TestCancelReachesOnlyItsOwnRequests(t *testing.T) {
	slow := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 1; echo finished"}}}`
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5}}`
	for _, sessions := range []bool{false, true} {
		e := newEnv(t, func(o *Options) { o.Sessions = sessions })
		postA := func(b string) (int, string) {
			resp, body := rawPost(t, e.url(), "POST", b, nil)
			return resp.StatusCode, body
		}
		postB := postA
		if sessions {
			postA, _ = sessionPost(t, e, nil)
			postB, _ = sessionPost(t, e, nil)
		}
		done := make(chan string, 1)
		go func() {
			_, body := postA(slow)
			done <- body
		}()
		deadline := time.Now().Add(10 * time.Second)
		for len(done) == 0 && time.Now().Before(deadline) {
			if code, body := postB(cancel); code != http.StatusAccepted {
				t.Errorf("sessions %v: cancel: %d %s", sessions, code, body)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if body := <-done; !strings.Contains(body, "finished") {
			t.Errorf("sessions %v: another client's cancel ended the call: %.300s", sessions, body)
		}
	}
}

// TestDuplicateIDsInBatch: a batch whose requests share an id gets an
// answer for each request it runs: the SDK drops the request whose id is
// already in use, unrun, rather than running it unanswered.
func TestDuplicateIDsInBatch(t *testing.T) {
	e := newEnv(t)
	batch := `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 0.5; echo one > d1.txt"}}},` +
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"d2.txt","content":"x"}}}]`
	resp, body := rawPost(t, e.url(), "POST", batch, map[string]string{"MCP-Protocol-Version": "2025-03-26", "Accept": "application/json"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var answers []json.RawMessage
	if err := json.Unmarshal([]byte(body), &answers); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	ran := 0
	for _, f := range []string{"d1.txt", "d2.txt"} {
		if _, err := os.Stat(filepath.Join(e.root, f)); err == nil {
			ran++
		}
	}
	if ran != len(answers) {
		t.Errorf("%d requests ran, %d answered: %s", ran, len(answers), body)
	}
}

// TestHostileBodies: a batch of 10,000 with sessions on is refused whole
// before anything runs; arguments nested a million levels deep (within the
// body limit) and a body over it are refused without running anything, on
// either path.
func TestHostileBodies(t *testing.T) {
	s := newEnv(t, func(o *Options) { o.Sessions = true })
	post, _ := sessionPost(t, s, nil)
	if code, body := post(batchOf(10000, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`)); code != http.StatusBadRequest || !strings.Contains(body, "--max-batch") {
		t.Errorf("a batch of 10,000 in a session: %d %.200s", code, body)
	}
	e := newEnv(t)
	deep := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"deep.txt","content":"x","extra":` +
		strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20) + `}}}`
	for _, accept := range []string{"application/json", "text/event-stream"} {
		resp, body := rawPost(t, e.url(), "POST", deep, map[string]string{"Accept": accept})
		if resp.StatusCode == http.StatusOK && !strings.Contains(body, `"error"`) && !strings.Contains(body, `"isError":true`) {
			t.Errorf("arguments nested 2^20 deep: %d %.300s", resp.StatusCode, body)
		}
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"big.txt","content":"` + strings.Repeat("a", 10<<20) + `"}}}`
	if resp, body := rawPost(t, e.url(), "POST", big, nil); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 10 MiB body: %d %.200s", resp.StatusCode, body)
	}
	if _, err := os.Stat(filepath.Join(e.root, "deep.txt")); err == nil {
		t.Error("the deeply nested call ran")
	}
}

// TestRepeatedKeysFastAndSDKAgree: a message that repeats a key (params,
// method, id, name, arguments) is read alike by the fast path and the SDK:
// the last value counts on both.
func TestRepeatedKeysFastAndSDKAgree(t *testing.T) {
	fast, slow := newEnv(t), newEnv(t)
	slow.srv.noFastPath = true
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"r1.txt","content":"x"}},"params":{"name":"read_text_file","arguments":{"path":"a.txt"}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list","method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"a.txt"}}}`,
		`{"jsonrpc":"2.0","id":3,"id":"three","method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"a.txt"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","name":"read_text_file","arguments":{"path":"a.txt"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"nope"},"arguments":{"path":"a.txt"}}}`,
	} {
		fr, fb := rawPost(t, fast.url(), "POST", body, map[string]string{"Accept": "application/json"})
		sr, sb := rawPost(t, slow.url(), "POST", body, map[string]string{"Accept": "application/json"})
		if fr.StatusCode != sr.StatusCode || normalize(fb, fast.root) != normalize(sb, slow.root) {
			t.Errorf("%s:\nfast %d %s\nsdk  %d %s", body, fr.StatusCode, fb, sr.StatusCode, sb)
		}
	}
	if n := fast.srv.fastCalls.Load(); n != 5 {
		t.Errorf("the fast path answered %d of the 5 messages", n)
	}
	for _, e := range []*env{fast, slow} {
		if _, err := os.Stat(filepath.Join(e.root, "r1.txt")); err == nil {
			t.Error("the first of two params ran")
		}
	}
}

// TestSessionBoundToItsToken: with a token configured, a session answers
// only requests that bring the token that opened it: another token that
// learned its Mcp-Session-Id can neither call in it, nor read its GET
// stream (where the daemon's questions to the client and the session's
// notifications go), nor answer the daemon's questions, nor end it (403);
// the session goes on. Within its session a request still works in the
// X-Scope-Path it sends, as every request does.
func TestSessionBoundToItsToken(t *testing.T) {
	tokens := u1Tokens(t)
	e := newEnv(t, func(o *Options) { o.AuthToken, o.Tokens, o.Sessions = "daemon-token", tokens, true })
	post, id := sessionPost(t, e, map[string]string{"Authorization": "Bearer daemon-token"})
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_allowed_directories","arguments":{}}}`
	other := map[string]string{"Authorization": "Bearer u1-token", "Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-06-18"}
	for _, m := range []struct{ method, body string }{
		{"POST", list},
		{"POST", `{"jsonrpc":"2.0","id":1,"result":{"action":"accept","content":{"approve":true,"always":true}}}`},
		{"GET", ""},
		{"DELETE", ""},
	} {
		h := map[string]string{"Accept": "application/json, text/event-stream"}
		if m.method == "GET" {
			h["Accept"] = "text/event-stream"
		}
		for k, v := range other {
			h[k] = v
		}
		// The status only: a GET that is let in is a stream that does not end.
		req, _ := http.NewRequest(m.method, e.url(), strings.NewReader(m.body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %.40s in the daemon token's session with another token: %d; want 403", m.method, m.body, resp.StatusCode)
		}
	}
	if code, body := post(list); code != http.StatusOK || !strings.Contains(body, `- `+e.root+`"`) {
		t.Errorf("the session after the other token's tries: %d %.300s", code, body)
	}
	resp, body := rawPost(t, e.url(), "POST", list, map[string]string{"Authorization": "Bearer daemon-token",
		"Mcp-Session-Id": id, "MCP-Protocol-Version": "2025-06-18", "X-Scope-Path": "users/u2"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `- `+e.root+`/users/u2"`) {
		t.Errorf("a request with its own X-Scope-Path in the session: %d %.300s", resp.StatusCode, body)
	}
	ownPost, _ := sessionPost(t, e, map[string]string{"Authorization": "Bearer u1-token"})
	if code, body := ownPost(list); code != http.StatusOK || !strings.Contains(body, `- `+e.root+`/users/u1"`) {
		t.Errorf("the bound token in its own session: %d %.300s", code, body)
	}
}

// TestSessionStreamsBounded: a session has at most one GET stream (a
// second gets 409 while the first is open), so what streams a client can
// hold open is bounded by --mcp-max-sessions; a stream nobody reads ends
// with its session (DELETE here; idle expiry alike), and takes no
// in-flight slot while it lasts.
func TestSessionStreamsBounded(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Sessions = true })
	_, id := sessionPost(t, e, nil)
	get := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url(), nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := get()
	defer first.Body.Close()
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first GET: %d", first.StatusCode)
	}
	second := get()
	second.Body.Close()
	if second.StatusCode != http.StatusConflict {
		t.Errorf("second GET stream of one session: %d, want 409", second.StatusCode)
	}
	if n := e.srv.inflight.Held("127.0.0.1"); n != 0 {
		t.Errorf("an open GET stream holds %d in-flight slots", n)
	}
	req, _ := http.NewRequest("DELETE", e.url(), nil)
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, first.Body); done <- err }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("the GET stream of an ended session is still open")
	}
}

// TestSessionShareAmongTokens: with --tokens, one token opens at most half
// of --mcp-max-sessions (rounded up), so another token still finds one: a
// token at its share is answered 503 naming its share and the flag, and a
// session it ends gives its share back.
func TestSessionShareAmongTokens(t *testing.T) {
	tokens := u1Tokens(t)
	e := newEnv(t, func(o *Options) { o.AuthToken, o.Tokens, o.Sessions, o.MaxSessions = "daemon-token", tokens, true, 3 })
	u1 := map[string]string{"Authorization": "Bearer u1-token"}
	end := func(token, id string) {
		req, _ := http.NewRequest("DELETE", e.url(), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Mcp-Session-Id", id)
		if resp, err := http.DefaultClient.Do(req); err != nil {
			t.Error(err)
		} else {
			resp.Body.Close()
		}
	}
	open := func(hdr map[string]string) (*http.Response, string) {
		t.Helper()
		h := map[string]string{"Accept": "application/json, text/event-stream"}
		for k, v := range hdr {
			h[k] = v
		}
		resp, body := rawPost(t, e.url(), "POST", initBody, h)
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			token := strings.TrimPrefix(hdr["Authorization"], "Bearer ")
			t.Cleanup(func() { end(token, id) })
		}
		return resp, body
	}
	var ids []string
	for range 2 {
		resp, body := open(u1)
		if resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("u1's session within its share: %d %s", resp.StatusCode, body)
		}
		ids = append(ids, resp.Header.Get("Mcp-Session-Id"))
	}
	resp, body := open(u1)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, `token \"u1\" holds 2 of the 3 MCP sessions, its share`) || !strings.Contains(body, "--mcp-max-sessions") {
		t.Errorf("u1's third session: %d %s; want 503 naming its share", resp.StatusCode, body)
	}
	if resp, body := open(map[string]string{"Authorization": "Bearer daemon-token"}); resp.Header.Get("Mcp-Session-Id") == "" {
		t.Errorf("the daemon token's session beside u1's share: %d %s", resp.StatusCode, body)
	}
	end("u1-token", ids[0])
	if resp, body := open(u1); resp.Header.Get("Mcp-Session-Id") == "" {
		t.Errorf("u1's session after it ended one: %d %s", resp.StatusCode, body)
	}
}

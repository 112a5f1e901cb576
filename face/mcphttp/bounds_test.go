package mcphttp

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/mcpjson"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// post sends body to /mcp from the loopback address src ("" = any) and
// returns the status, headers and the whole reply.
func post(t *testing.T, url, src, body string) (int, http.Header, []byte) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	if src != "" {
		tr.DialContext = (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// batchOf is a JSON-RPC batch of n copies of msg (with "%d" for the id).
func batchOf(n int, msg string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(msg, i+1)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

const listMsg = `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`

// TestBatchLimit: a batch of more than MaxBatch messages is refused whole
// with a small reply. A 3.4 MB batch of tools/list is what, without the
// limit, would get a 683 MB reply.
func TestBatchLimit(t *testing.T) {
	e := newEnv(t)
	big := batchOf(3_400_000/len(fmt.Sprintf(listMsg, 100000)), listMsg)
	if len(big) < 3_300_000 || len(big) > DefaultMaxBodyBytes {
		t.Fatalf("the big batch is %d bytes", len(big))
	}
	tests := []struct {
		name     string
		body     string
		status   int
		results  int // replies with a result
		maxReply int // bytes
	}{
		{"3.4 MB of tools/list", big, http.StatusBadRequest, 0, 1 << 10},
		{"one over the limit", batchOf(DefaultMaxBatch+1, listMsg), http.StatusBadRequest, 0, 1 << 10},
		{"ids and strings with commas do not count", batchOf(DefaultMaxBatch+1, `{"jsonrpc":"2.0","id":"a,[b{,%d","method":"tools/list"}`), http.StatusBadRequest, 0, 1 << 10},
		{"at the limit", batchOf(DefaultMaxBatch, listMsg), http.StatusOK, DefaultMaxBatch, DefaultMaxReplyBytes},
		{"a few, with spaces", " [ " + batchOf(3, listMsg)[1:], http.StatusOK, 3, DefaultMaxReplyBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, reply := post(t, e.url(), "", tt.body)
			t.Logf("request %d bytes, reply %d bytes", len(tt.body), len(reply))
			if status != tt.status {
				t.Fatalf("status %d, want %d: %.300s", status, tt.status, reply)
			}
			if len(reply) > tt.maxReply {
				t.Fatalf("reply of %d bytes, want at most %d", len(reply), tt.maxReply)
			}
			if tt.status != http.StatusOK {
				var r rpcReply
				if err := json.Unmarshal(reply, &r); err != nil || r.Error == nil || r.Error.Code != -32600 ||
					!strings.Contains(r.Error.Message, fmt.Sprintf("more than %d messages", DefaultMaxBatch)) || !strings.Contains(r.Error.Message, "--max-batch") {
					t.Fatalf("reply %s (%v), want JSON-RPC error -32600 naming the limit and --max-batch", reply, err)
				}
				return
			}
			var rs []rpcReply
			if err := json.Unmarshal(reply, &rs); err != nil {
				t.Fatalf("reply is not a batch: %v", err)
			}
			n := 0
			for _, r := range rs {
				if r.Error == nil && len(r.Result) > 0 {
					n++
				}
			}
			if n != tt.results {
				t.Fatalf("%d results, want %d", n, tt.results)
			}
		})
	}
}

// TestReplyLimit: a result that would make the reply larger than
// MaxReplyBytes is replaced by JSON-RPC error -32000, on the fast path, on
// the SDK's path, and within a batch (whose messages share the limit).
func TestReplyLimit(t *testing.T) {
	const limit = 64 << 10
	line := strings.Repeat("x", 99) + "\n"
	tests := []struct {
		name    string
		sdk     bool // skip the fast path
		body    string
		results int
		errors  int
	}{
		{"single read, fast path", false, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"big.txt"}}}`, 0, 1},
		{"single read, SDK path", true, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"big.txt"}}}`, 0, 1},
		{"single small read, fast path", false, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"big.txt","limit":10}}}`, 1, 0},
		{"batch sharing the limit", false, batchOf(8, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"big.txt","limit":200}}}`), 3, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.MaxReplyBytes = limit })
			e.srv.noFastPath = tt.sdk
			if err := os.WriteFile(filepath.Join(e.root, "big.txt"), []byte(strings.Repeat(line, 1000)), 0o644); err != nil {
				t.Fatal(err)
			}
			status, _, reply := post(t, e.url(), "", tt.body)
			t.Logf("reply %d bytes", len(reply))
			if status != http.StatusOK {
				t.Fatalf("status %d: %.300s", status, reply)
			}
			if len(reply) > limit+tt.errors*1024 {
				t.Fatalf("reply of %d bytes, over the limit of %d (plus the error messages)", len(reply), limit)
			}
			var rs []rpcReply
			if strings.HasPrefix(tt.body, "[") {
				if err := json.Unmarshal(reply, &rs); err != nil {
					t.Fatalf("not a batch reply: %v: %.300s", err, reply)
				}
			} else {
				var r rpcReply
				if err := json.Unmarshal(reply, &r); err != nil {
					t.Fatalf("not a reply: %v: %.300s", err, reply)
				}
				rs = append(rs, r)
			}
			results, errs := 0, 0
			for _, r := range rs {
				switch {
				case r.Error != nil:
					errs++
					if r.Error.Code != -32000 || !strings.Contains(r.Error.Message, "--max-reply-bytes") || !strings.Contains(r.Error.Message, fmt.Sprint(limit)) || string(r.ID) == "null" {
						t.Errorf("error %d %q for id %s, want -32000 naming the limit and --max-reply-bytes", r.Error.Code, r.Error.Message, r.ID)
					}
				case len(r.Result) > 0:
					results++
				}
			}
			if results != tt.results || errs != tt.errors {
				t.Errorf("%d results and %d errors, want %d and %d", results, errs, tt.results, tt.errors)
			}
		})
	}
}

// TestInflightPerAddress: a client address with MaxInflightPerIP requests
// running gets 429 with Retry-After for one more (after a short wait);
// another address is not affected, and the slot comes back.
func TestInflightPerAddress(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Inflight = admit.NewInflight(2, 100*time.Millisecond) })
	slow := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 2"}}}`
	list := fmt.Sprintf(listMsg, 1)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if status, _, reply := post(t, e.url(), "127.0.0.1", slow); status != http.StatusOK {
				t.Errorf("slow call: %d %.300s", status, reply)
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if e.srv.inflight.Held("127.0.0.1") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the two slow calls never ran together")
		}
		time.Sleep(5 * time.Millisecond)
	}
	status, hdr, reply := post(t, e.url(), "127.0.0.1", list)
	if status != http.StatusTooManyRequests || hdr.Get("Retry-After") == "" || !strings.Contains(string(reply), "--max-inflight-per-ip") {
		t.Errorf("third request: %d (Retry-After %q) %.300s, want 429 naming --max-inflight-per-ip", status, hdr.Get("Retry-After"), reply)
	}
	if status, _, reply := post(t, e.url(), "127.0.0.2", list); status != http.StatusOK {
		t.Errorf("another address: %d %.300s", status, reply)
	}
	wg.Wait()
	if status, _, reply := post(t, e.url(), "127.0.0.1", list); status != http.StatusOK {
		t.Errorf("after the slow calls: %d %.300s", status, reply)
	}
	for _, addr := range []string{"127.0.0.1", "127.0.0.2"} {
		if n := e.srv.inflight.Held(addr); n != 0 {
			t.Errorf("%s holds %d slots after every request ended", addr, n)
		}
	}
}

func TestJSONStringLen(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c", "\b\f\n\r\t\x00\x1f", "<>&", "\u2028\u2029", "héllo ✓ 😀", "bad \xff\xfe utf8 \xe2\x82", strings.Repeat("x\n", 1000)} {
		if got, want := jsonStringLen(s), len(mcpjson.AppendString(nil, s)); got != want {
			t.Errorf("jsonStringLen(%q) = %d, want %d", s, got, want)
		}
	}
	// A plain-text tool result is counted, not encoded: at least its
	// encoded size, and close to it.
	for _, res := range []*mcp.CallToolResult{
		{Content: []mcp.Content{&mcp.TextContent{Text: "a\nb <x>"}}},
		{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("line\n", 500)}, &mcp.TextContent{Text: "two"}}, IsError: true},
	} {
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if got := resultSize(res); got < int64(len(b)) || got > int64(len(b))+32 {
			t.Errorf("resultSize = %d, encoded %d bytes: %s", got, len(b), b)
		}
	}
}

// batchLen counts a batch's messages as encoding/json sees them: for any
// well-formed JSON array it gives the number of elements (or limit+1 once
// it is over limit), and it never claims a count for malformed input that
// the decoder would take as an array of a different length.
func FuzzBatchLen(f *testing.F) {
	for _, s := range []string{`[]`, `[1]`, `[{"a":"]"},{"b":"\",["}]`, `[[1,2],[3]]`, ` [ {} , {} ] `, `[`, `[1,`, `["\\"]`, `{}`} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, body []byte, lim uint8) {
		limit := int(lim%8) + 1
		n, ok := batchLen(body, limit)
		var elems []json.RawMessage
		if err := json.Unmarshal(body, &elems); err != nil || !ok {
			return
		}
		if want := min(len(elems), limit+1); n != want && !(n > limit && len(elems) > limit) {
			t.Fatalf("batchLen(%q, %d) = %d; the decoder sees %d elements", body, limit, n, len(elems))
		}
	})
}

// jsonStringLen is the length appendJSONString produces.
func FuzzJSONStringLen(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\\n\t<>&", "é€😀", "\xff\xfe", "\u2028\u2029", "\x00\x1f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := jsonStringLen(s), len(mcpjson.AppendString(nil, s)); got != want {
			t.Fatalf("jsonStringLen(%q) = %d; appendJSONString makes %d bytes", s, got, want)
		}
	})
}

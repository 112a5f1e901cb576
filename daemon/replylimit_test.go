package daemon

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestReplyLimitOnEveryFace: --max-reply-bytes bounds an answer on /mcp,
// /gateway and /execute alike, measured as sent (JSON escapes included),
// each refusal in the one wording that names the flag
// (admit.ReplyTooLarge); an answer under it passes.
func TestReplyLimitOnEveryFace(t *testing.T) {
	c := testConfig(t)
	c.MaxReplyBytes = 64 << 10
	c.MaxReadSize = 32 << 10
	must(t, c.Validate())
	r := start(t, c, nil)
	const words = "the reply to this request would be"

	for _, tc := range []struct {
		name, command string
		tooLarge      bool
	}{
		// 20,000 '<', which JSON writes as \u003c: 120 KB once escaped.
		{"big", `printf '%20000s' '' | tr ' ' '<'`, true},
		{"small", `echo small`, false},
	} {
		args := `{"command":` + jsonString(tc.command) + `}`
		code, body := send(t, http.MethodPost, r.url+"/execute", `{"tool_name":"exec","arguments":`+args+`}`, nil)
		var out struct{ Status, Output, Error string }
		if err := json.Unmarshal([]byte(body), &out); err != nil || code != http.StatusOK {
			t.Fatalf("/execute %s: %d %v %.200s", tc.name, code, err, body)
		}
		if got := out.Status == "error" && strings.Contains(out.Error, words) && strings.Contains(out.Error, "--max-reply-bytes") && strings.Contains(out.Error, "65536"); got != tc.tooLarge {
			t.Errorf("/execute %s: %d bytes, status %q, error %.200q; want refused %v", tc.name, len(body), out.Status, out.Error, tc.tooLarge)
		}
		if len(body) > int(c.MaxReplyBytes) {
			t.Errorf("/execute %s answered %d bytes, over the limit", tc.name, len(body))
		}

		_, body = send(t, http.MethodPost, r.url+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":`+args+`}}`, nil)
		if got := strings.Contains(body, `"code":-32000`) && strings.Contains(body, words); got != tc.tooLarge {
			t.Errorf("/mcp %s: %.200s; want refused %v", tc.name, body, tc.tooLarge)
		}

		got := rpcGW(t, dialGW(t, r.url, ""), `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"sessionId":"s","toolId":"exec","args":`+args+`}}`)
		if refused := strings.Contains(got, `"code":-32006`) && strings.Contains(got, words); refused != tc.tooLarge {
			t.Errorf("/gateway %s: %.200s; want refused %v", tc.name, got, tc.tooLarge)
		}
	}
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

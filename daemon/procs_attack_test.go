package daemon

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestAttackProcessToolsScopedTokens: the process and watch tools through
// the three faces that carry a token of the --tokens file (MCP, REST,
// /gateway). A process belongs to the scope its caller's token (narrowed
// by X-Scope-Path) names: another scope's token finds nothing of it on
// every face, a read-only or no-exec token of its own scope lists and
// reads it but neither starts nor signals nor kills; the process outlives
// the removal of the token that started it, and a token of its scope still
// controls it; a watch of another scope is refused.
func TestAttackProcessToolsScopedTokens(t *testing.T) {
	c := testConfig(t)
	c.AuthToken = "master-token"
	c.ProcessTools, c.WatchTools = true, true
	for _, d := range []string{"a", "b"} {
		must(t, os.MkdirAll(filepath.Join(c.Root, d), 0o755))
	}
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	alice := tokenLine("alice", "alice-token", `,"scope":"a"`)
	carol := tokenLine("carol", "carol-token", `,"scope":"a","exec":false`)
	erin := tokenLine("erin", "erin-token", `,"scope":"a","readOnly":true`)
	dave := tokenLine("dave", "dave-token", `,"scope":"b"`)
	write := func(lines ...string) {
		must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+strings.Join(lines, ",")+`]}`), 0o600))
	}
	write(alice, carol, erin, dave)
	c.TokensFile = tokens
	must(t, c.Validate())
	r := start(t, c, nil)
	mark := "daemon-procs-attack-" + strconv.FormatInt(time.Now().UnixNano(), 36)

	gw := map[string]*gwConn{}
	// call runs tool as token (scope: X-Scope-Path) over face and returns
	// the tool's text, or the whole body where there is none.
	call := func(face, token, scope, tool, args string) string {
		t.Helper()
		switch face {
		case "mcp":
			_, body := callAs(t, r.url, token, scope, tool, args)
			return body
		case "rest":
			hdr := bearer(token)
			if scope != "" {
				hdr["X-Scope-Path"] = scope
			}
			_, body := send(t, http.MethodPost, r.url+"/execute", `{"tool_name":"`+tool+`","arguments":`+args+`}`, hdr)
			return body
		default:
			key := token + "|" + scope
			if gw[key] == nil {
				hdr := http.Header{"Authorization": {"Bearer " + token}}
				if scope != "" {
					hdr.Set("X-Scope-Path", scope)
				}
				gw[key] = &gwConn{c: dialGWHeader(t, r.url, hdr)}
			}
			g := gw[key]
			g.id++
			return rpcGW(t, g.c, `{"jsonrpc":"2.0","id":`+strconv.Itoa(g.id)+`,"method":"tools.invoke","params":{"sessionId":"s","toolId":"`+tool+`","args":`+args+`}}`)
		}
	}
	body := call("mcp", "alice-token", "", "process_start", `{"command":"echo alice-out; sleep 60","env":{"PROCS_MARK":"`+mark+`"}}`)
	i := strings.Index(body, `\"id\":\"`)
	if i < 0 {
		t.Fatalf("alice's start: %s", body)
	}
	id := body[i+len(`\"id\":\"`) : i+len(`\"id\":\"`)+12]
	idArgs := `{"id":"` + id + `"}`
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(call("rest", "alice-token", "", "process_output", idArgs), "alice-out"); {
		if time.Now().After(deadline) { // a hang guard
			t.Fatal("alice's process printed nothing")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, face := range []string{"mcp", "rest", "gateway"} {
		// Another scope, and alice's own narrowed to a/sub: nothing.
		for _, who := range [][2]string{{"dave-token", ""}, {"alice-token", "sub"}, {"master-token", "b"}} {
			for tool, args := range map[string]string{
				"process_output": idArgs, "process_wait": `{"id":"` + id + `","timeoutMs":1}`,
				"process_signal": `{"id":"` + id + `","signal":"TERM"}`, "process_kill": idArgs,
			} {
				if got := call(face, who[0], who[1], tool, args); !strings.Contains(got, "no background process") {
					t.Errorf("%s: %s (scope %q) %s of a's process: %.300s", face, who[0], who[1], tool, got)
				}
			}
			if got := call(face, who[0], who[1], "process_list", `{}`); strings.Contains(got, id) {
				t.Errorf("%s: %s (scope %q) lists a's process: %.300s", face, who[0], who[1], got)
			}
		}
		// Its own scope without exec, or read-only: reads, never controls.
		for _, tok := range []string{"carol-token", "erin-token"} {
			if got := call(face, tok, "", "process_output", idArgs); !strings.Contains(got, "alice-out") {
				t.Errorf("%s: %s reads a's process: %.300s", face, tok, got)
			}
			for tool, args := range map[string]string{
				"process_start":  `{"command":"true"}`,
				"process_signal": `{"id":"` + id + `","signal":"TERM"}`, "process_kill": idArgs,
			} {
				if got := call(face, tok, "", tool, args); !strings.Contains(got, "Permission denied") {
					t.Errorf("%s: %s %s: %.300s", face, tok, tool, got)
				}
			}
		}
		// A watch of another scope's directory.
		for _, p := range []string{"../a", "/../a"} {
			if got := call(face, "dave-token", "", "watch_changes", `{"path":"`+p+`"}`); !strings.Contains(strings.ToLower(got), "escape") {
				t.Errorf("%s: dave watching %s: %.300s", face, p, got)
			}
		}
	}
	// A /gateway connection that started a process closes: it runs on.
	g := dialGW(t, r.url, "dave-token")
	got := rpcGW(t, g, `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"sessionId":"s","toolId":"process_start","args":{"command":"sleep 60","env":{"PROCS_MARK":"`+mark+`"}}}}`)
	j := strings.Index(got, `\"id\":\"`)
	if j < 0 {
		t.Fatalf("dave's start over /gateway: %.300s", got)
	}
	daveID := got[j+len(`\"id\":\"`) : j+len(`\"id\":\"`)+12]
	g.Close()
	if got := call("rest", "dave-token", "", "process_list", `{}`); !strings.Contains(got, daveID) || !strings.Contains(got, "running") {
		t.Errorf("b's process after its /gateway connection closed: %.300s", got)
	}
	// alice's token removed: her process runs on, and a token of its
	// scope that may run commands still ends it.
	write(carol, erin, dave, tokenLine("alice2", "alice2-token", `,"scope":"a"`))
	if _, err := r.d.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	if code, _ := callAs(t, r.url, "alice-token", "", "process_list", `{}`); code != http.StatusUnauthorized {
		t.Errorf("alice after the reload: %d, want 401", code)
	}
	if got := call("rest", "alice2-token", "", "process_list", `{}`); !strings.Contains(got, id) || !strings.Contains(got, "running") {
		t.Errorf("a's process after its token was removed: %.300s", got)
	}
	got = call("rest", "alice2-token", "", "process_kill", idArgs)
	var outer struct{ Output string }
	var k struct{ State, Signal string }
	if json.Unmarshal([]byte(got), &outer) != nil || json.Unmarshal([]byte(outer.Output), &k) != nil || k.State != "exited" || k.Signal != "KILL" {
		t.Errorf("kill by another token of the scope: %.300s", got)
	}
}

type gwConn struct {
	c  *websocket.Conn
	id int
}

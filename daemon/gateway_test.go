package daemon

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func dialGW(t *testing.T, url, token string) *websocket.Conn {
	t.Helper()
	hdr := http.Header{}
	if token != "" {
		hdr.Set("Authorization", "Bearer "+token)
	}
	return dialGWHeader(t, url, hdr)
}

func dialGWHeader(t *testing.T, url string, hdr http.Header) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(url, "http")+"/gateway", hdr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func rpcGW(t *testing.T, ws *websocket.Conn, msg string) string {
	t.Helper()
	if err := ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, b, err := ws.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGatewayClosedOnShutdown: an open /gateway connection gets close 1001
// when the daemon shuts down, and the shutdown does not wait for it.
func TestGatewayClosedOnShutdown(t *testing.T) {
	r := start(t, testConfig(t), nil)
	ws := dialGW(t, r.url, "")
	if got := rpcGW(t, ws, `{"jsonrpc":"2.0","id":1,"method":"tools.list","params":{"sessionId":"s"}}`); !strings.Contains(got, "read_text_file") {
		t.Fatalf("tools.list: %.200s", got)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- r.stop() }()
	ws.SetReadDeadline(time.Now().Add(20 * time.Second)) // a hang guard
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Errorf("read after shutdown: %v; want close 1001", err)
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("stop: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop with a /gateway connection open")
	}
}

// TestGatewayLimitFlags: the daemon applies --gateway-rate/--gateway-burst,
// --gateway-max-batch and --max-reply-bytes.
func TestGatewayLimitFlags(t *testing.T) {
	c := testConfig(t)
	c.GatewayRate, c.GatewayBurst, c.GatewayMaxBatch = 1, 1, 2
	c.MaxReplyBytes, c.MaxReadSize = 64<<10, 64<<10
	if err := os.WriteFile(filepath.Join(c.Root, "big.txt"), []byte(strings.Repeat("012345678901234567890123456789\n", 2100)), 0o644); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	ws := dialGW(t, r.url, "")
	list := `{"jsonrpc":"2.0","id":1,"method":"tools.list","params":{}}`
	if got := rpcGW(t, ws, list); strings.Contains(got, `"error"`) {
		t.Fatalf("first: %.200s", got)
	}
	if got := rpcGW(t, ws, list); !strings.Contains(got, "rate limit: more than 1 requests per second") {
		t.Errorf("second right away: %.200s", got)
	}
	time.Sleep(1100 * time.Millisecond) // refill the bucket
	if got := rpcGW(t, ws, "["+list+","+list+","+list+"]"); !strings.Contains(got, "2") || !strings.Contains(got, "batch") {
		t.Errorf("a batch of 3 with --gateway-max-batch 2: %.300s", got)
	}
	time.Sleep(1100 * time.Millisecond)
	read := `{"jsonrpc":"2.0","id":2,"method":"tools.invoke","params":{"toolId":"read_multiple_files","args":{"paths":["big.txt"]}}}`
	// The file is just under the read limit; escaped in JSON, it is
	// over the reply limit.
	if got := rpcGW(t, ws, read); !strings.Contains(got, `"code":-32006`) || !strings.Contains(got, "--max-reply-bytes") {
		t.Errorf("a 63 KiB file's answer (%d bytes) with --max-reply-bytes 64KiB: %.300s", len(got), got)
	}
}

// TestGatewayApprove: tools.approve decides a system.run request on a
// connection opened with the operator's token, never on the agent's.
func TestGatewayApprove(t *testing.T) {
	c := testConfig(t)
	c.GatewayTools = true
	c.AuthToken, c.OperatorToken = "agent-tok", "operator-tok"
	c.ExecApprovals = filepath.Join(t.TempDir(), "a.json")
	os.WriteFile(c.ExecApprovals, []byte(`{}`), 0o600)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	agent := dialGW(t, r.url, c.AuthToken)
	got := rpcGW(t, agent, `{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"toolId":"system.run","sessionId":"s","args":{"argv":["echo","via gateway"]}}}`)
	i := strings.Index(got, `\"requestId\":\"`)
	if i < 0 {
		t.Fatalf("no pending request: %s", got)
	}
	id := got[i+len(`\"requestId\":\"`):]
	id = id[:strings.Index(id, `\"`)]
	approve := `{"jsonrpc":"2.0","id":2,"method":"tools.approve","params":{"requestId":"` + id + `","approved":true}}`
	if got := rpcGW(t, agent, approve); !strings.Contains(got, "-32004") || !strings.Contains(got, "operator's token") {
		t.Errorf("the agent approving: %s", got)
	}
	op := dialGW(t, r.url, c.OperatorToken)
	if got := rpcGW(t, op, approve); !strings.Contains(got, `"state":"approved"`) {
		t.Errorf("the operator approving: %s", got)
	}
	got = rpcGW(t, agent, `{"jsonrpc":"2.0","id":3,"method":"tools.invoke","params":{"toolId":"system.run","sessionId":"s","args":{"requestId":"`+id+`"}}}`)
	if !strings.Contains(got, `via gateway`) {
		t.Errorf("the approved run: %s", got)
	}
}

package gatewayface_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/face/gatewayface"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// TestAttackEnvelope: ids of every JSON type and of any size, a message of
// exactly the size limit, batches at and past the limit, nested batches
// and duplicate keys. A string, number or null id is echoed byte for byte;
// any other is refused with a null id; every answer is valid JSON; the
// connection stays up throughout.
func TestAttackEnvelope(t *testing.T) {
	f := newFaces(t, registry.Options{})
	gw := dialGateway(t, f.srv.URL, authHdr())
	read := func() []byte {
		t.Helper()
		_ = gw.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, b, err := gw.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(b) {
			t.Fatalf("not JSON: %.200s", b)
		}
		return b
	}
	send := func(msg string) {
		t.Helper()
		if err := gw.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{`1`, `-1`, `0`, `1.5e300`, `-0.0e-0`, `"s"`, `""`, `"\u0000\ud800"`, `null`,
		strings.Repeat("9", 200<<10), `"` + strings.Repeat("x", 500<<10) + `"`} {
		send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools.list"}`)
		var r rpcResp
		json.Unmarshal(read(), &r)
		if string(r.ID) != id || r.Error != nil {
			t.Errorf("id %.40s: answered with id %.40s, error %+v", id, r.ID, r.Error)
		}
	}
	for _, id := range []string{`true`, `false`, `{}`, `[]`, `{"a":1}`, `[1]`} {
		send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools.list"}`)
		var r rpcResp
		json.Unmarshal(read(), &r)
		if string(r.ID) != "null" || r.Error == nil || r.Error.Code != gatewayface.CodeInvalidRequest {
			t.Errorf("id %s: %s %+v", id, r.ID, r.Error)
		}
	}
	// Duplicate keys: the last one counts, as encoding/json reads them.
	send(`{"jsonrpc":"2.0","id":1,"id":2,"method":"tools.nope","method":"tools.list"}`)
	var r rpcResp
	json.Unmarshal(read(), &r)
	if string(r.ID) != "2" || r.Error != nil {
		t.Errorf("duplicate keys: %s %+v", r.ID, r.Error)
	}
	// A message of exactly the limit is served.
	msg := `{"jsonrpc":"2.0","id":7,"method":"tools.list"}`
	send(msg + strings.Repeat(" ", gatewayface.DefaultMaxMessage-len(msg)))
	json.Unmarshal(read(), &r)
	if string(r.ID) != "7" || r.Error != nil {
		t.Errorf("a message at the limit: %s %+v", r.ID, r.Error)
	}
	// A batch at the limit is answered whole, one past it refused whole.
	req := func(i int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools.list"}`, i) }
	var reqs []string
	for i := range gatewayface.DefaultMaxBatch + 1 {
		reqs = append(reqs, req(i))
	}
	send("[" + strings.Join(reqs[:gatewayface.DefaultMaxBatch], ",") + "]")
	var batch []rpcResp
	if err := json.Unmarshal(read(), &batch); err != nil || len(batch) != gatewayface.DefaultMaxBatch {
		t.Errorf("a batch at the limit: %d answers (%v)", len(batch), err)
	}
	send("[" + strings.Join(reqs, ",") + "]")
	json.Unmarshal(read(), &r)
	if r.Error == nil || r.Error.Code != gatewayface.CodeInvalidRequest {
		t.Errorf("a batch past the limit: %+v", r.Error)
	}
	// A nested batch is one invalid element, not a batch of its own.
	send(`[[` + req(1) + `],` + req(2) + `]`)
	batch = nil
	if err := json.Unmarshal(read(), &batch); err != nil || len(batch) != 2 || batch[0].Error == nil || batch[0].Error.Code != gatewayface.CodeInvalidRequest || string(batch[1].ID) != "2" {
		t.Errorf("a nested batch: %+v (%v)", batch, err)
	}
	// A batch of notifications only is not answered; the next request is.
	send(`[{"jsonrpc":"2.0","method":"tools.list"},{"jsonrpc":"2.0","method":"tools.list"}]`)
	send(req(9))
	json.Unmarshal(read(), &r)
	if string(r.ID) != "9" {
		t.Errorf("after a batch of notifications: %s", r.ID)
	}
}

// TestAttackInFlightBounded: one connection sending many slow calls at
// once holds at most MaxInFlight goroutines for them; the rest are
// answered busy at once, and closing the connection lets everything go.
func TestAttackInFlightBounded(t *testing.T) {
	f := newFaces(t, registry.Options{})
	before := runtime.NumGoroutine()
	gw := dialGateway(t, f.srv.URL, authHdr())
	const n = 200
	var all bytes.Buffer
	for i := range n {
		all.Reset()
		fmt.Fprintf(&all, `{"jsonrpc":"2.0","id":%d,"method":"tools.invoke","params":{"toolId":"slow","args":{}}}`, i)
		if err := gw.WriteMessage(websocket.TextMessage, all.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	busy, served := 0, 0
	_ = gw.SetReadDeadline(time.Now().Add(30 * time.Second))
	peak := 0
	for busy+served < n {
		_, b, err := gw.ReadMessage()
		if err != nil {
			t.Fatalf("after %d answers: %v", busy+served, err)
		}
		peak = max(peak, runtime.NumGoroutine()-before)
		var r rpcResp
		json.Unmarshal(b, &r)
		switch {
		case r.Error != nil && (r.Error.Code == gatewayface.CodeBusy || r.Error.Code == gatewayface.CodeRateLimited):
			busy++
		default:
			served++
		}
	}
	// MaxInFlight is 2 here; the rate limit's burst (100) admits the rest
	// only to be refused busy or rate limited.
	t.Logf("%d served, %d refused, peak %d goroutines more", served, busy, peak)
	if served > n/2 || busy == 0 {
		t.Errorf("%d served, %d refused", served, busy)
	}
	// The connection's reader, its in-flight calls, the client's and the
	// server's plumbing: a few dozen at most, not one per message.
	if peak > 40 {
		t.Errorf("%d goroutines more than before while %d messages were sent", peak, n)
	}
}

// TestAttackReplyBounded: the answers to one message are at most MaxReply
// bytes (--max-reply-bytes), a batch's together: an answer that would pass
// what is left is error CodeReplyTooLarge naming the flag, the answers
// that fit are sent, and the connection stays up. Without the bound a
// batch of MaxBatch whole-file reads held MaxBatch results at once.
func TestAttackReplyBounded(t *testing.T) {
	f := newFaces(t, registry.Options{}, func(o *gatewayface.Options) { o.MaxReply = 6000 })
	gw := dialGateway(t, f.srv.URL, authHdr())
	read := func() []byte {
		t.Helper()
		_ = gw.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, b, err := gw.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	call := func(id int, path string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools.invoke","params":{"toolId":"read","args":{"path":%q}}}`, id, path)
	}
	// One read fits; two of 4 KiB in a batch do not both fit.
	if err := gw.WriteMessage(websocket.TextMessage, []byte("["+call(1, "a.txt")+","+call(2, "4k.txt")+","+call(3, "4k.txt")+","+call(4, "a.txt")+"]")); err != nil {
		t.Fatal(err)
	}
	b := read()
	if len(b) > 6000 {
		t.Errorf("the batch's answer is %d bytes, past the limit of 6000", len(b))
	}
	var batch []rpcResp
	if err := json.Unmarshal(b, &batch); err != nil || len(batch) != 4 {
		t.Fatalf("batch: %v, %.300s", err, b)
	}
	for i, r := range batch {
		tooLarge := r.Error != nil && r.Error.Code == gatewayface.CodeReplyTooLarge && strings.Contains(r.Error.Message, "--max-reply-bytes")
		if want := i == 2; tooLarge != want || !want && r.Error != nil {
			t.Errorf("answer %d (id %s): error %+v; want the limit's error: %v", i, r.ID, r.Error, want)
		}
	}
	// The bound is each message's: the next one has it whole again.
	if err := gw.WriteMessage(websocket.TextMessage, []byte(call(5, "4k.txt"))); err != nil {
		t.Fatal(err)
	}
	var r rpcResp
	if err := json.Unmarshal(read(), &r); err != nil || string(r.ID) != "5" || r.Error != nil {
		t.Errorf("a read that fits, after the batch: %v %s %+v", err, r.ID, r.Error)
	}
}

// attackTools adds to f's registry "hold", which runs until its context
// ends and then reports it on cancelled, and "big", whose answer is 16 MiB,
// more than the sockets of a client that reads nothing hold.
func attackTools(t *testing.T, f *faces) (cancelled <-chan struct{}, started <-chan struct{}) {
	t.Helper()
	c, s := make(chan struct{}, 16), make(chan struct{}, 16)
	text := strings.Repeat("x", 16<<20)
	err := f.reg.Set("attack", []registry.Tool{
		{Name: "hold", Description: "holds", InputSchema: map[string]any{"type": "object"}, Timeout: 10 * time.Minute,
			Handler: func(ctx context.Context, _ registry.Call) *mcp.CallToolResult {
				s <- struct{}{}
				<-ctx.Done()
				c <- struct{}{}
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: ctx.Err().Error()}}}
			}},
		{Name: "big", Description: "16 MiB", InputSchema: map[string]any{"type": "object"},
			Handler: func(context.Context, registry.Call) *mcp.CallToolResult {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
			}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, s
}

// dialNonReader opens /gateway with a receive buffer of 4 KiB, for a
// client that reads nothing.
func dialNonReader(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetReadBuffer(4096)
		}
		return c, err
	}}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(url, "http")+"/gateway", authHdr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}

func invoke(id int, tool string) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools.invoke","params":{"toolId":%q,"args":{}}}`, id, tool)
}

// TestAttackStalledReaderEndsConnection: a client that sends calls and
// reads none of the answers. Once a write has waited for it past the stall
// bound (each 64 KiB, as admit.ReplyDeadline bounds an HTTP reply), the
// connection ends, and with it the calls it still runs: no answer of
// theirs could be sent. The connection used to stay up with its writes
// failing, running every call the client sent for nobody.
func TestAttackStalledReaderEndsConnection(t *testing.T) {
	gatewayface.SetWriteStall(t, 200*time.Millisecond)
	f := newFaces(t, registry.Options{})
	cancelled, started := attackTools(t, f)
	gw := dialNonReader(t, f.srv.URL)
	if err := gw.WriteMessage(websocket.TextMessage, invoke(1, "hold")); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := gw.WriteMessage(websocket.TextMessage, invoke(2, "big")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second): // a hang guard; the call holds for 10 minutes
		t.Fatal("a call of a connection whose client reads nothing was not cancelled")
	}
}

// TestAttackSlowReaderGetsItsAnswer: the stall bound is each piece's, not
// the message's: a client that keeps reading, with pauses, gets an answer
// that takes it longer than the bound in all.
func TestAttackSlowReaderGetsItsAnswer(t *testing.T) {
	gatewayface.SetWriteStall(t, time.Second)
	f := newFaces(t, registry.Options{})
	attackTools(t, f)
	gw := dialGateway(t, f.srv.URL, authHdr())
	if err := gw.WriteMessage(websocket.TextMessage, invoke(1, "big")); err != nil {
		t.Fatal(err)
	}
	_ = gw.SetReadDeadline(time.Now().Add(time.Minute))
	_, r, err := gw.NextReader()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32<<10)
	n := 0
	start := time.Now()
	for next := 1 << 20; ; {
		m, err := r.Read(buf)
		n += m
		if err != nil {
			break
		}
		if n >= next { // a pause of a tenth of the bound after each MiB: 1.6 s in all
			time.Sleep(100 * time.Millisecond)
			next += 1 << 20
		}
	}
	t.Logf("%d bytes in %v", n, time.Since(start))
	if n < 16<<20 {
		t.Errorf("a slow reader got %d bytes of a 16 MiB answer", n)
	}
}

// TestAttackShutdownWithStalledReaders: connections whose clients read
// nothing, each with a write blocked on them and a call running, do not
// hold a shutdown past its context. Shutdown used to take each
// connection's write lock in turn to send its close frame, and so waited
// for each blocked write to give up (each piece's stall bound), one
// connection after another, whatever its context said.
func TestAttackShutdownWithStalledReaders(t *testing.T) {
	gatewayface.SetWriteStall(t, 10*time.Minute)
	root := t.TempDir()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &faces{reg: registry.New(registry.Options{})}
	cancelled, started := attackTools(t, f)
	rules := admit.Rules{Guard: httpguard.New(httpguard.Options{AuthToken: token}), Token: httpguard.NewToken(token), RootDir: root}
	gws := gatewayface.New(gatewayface.Options{Registry: f.reg, Workspace: ws, Admit: rules})
	srv := httptest.NewServer(gws)
	t.Cleanup(srv.Close)
	const conns = 3
	for range conns {
		gw := dialNonReader(t, srv.URL)
		if err := gw.WriteMessage(websocket.TextMessage, invoke(1, "hold")); err != nil {
			t.Fatal(err)
		}
		<-started
		if err := gw.WriteMessage(websocket.TextMessage, invoke(2, "big")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the 16 MiB answers fill the sockets
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		t0 := time.Now()
		err := gws.Shutdown(ctx)
		t.Logf("Shutdown took %v", time.Since(t0))
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("Shutdown: %v", err)
	case <-time.After(20 * time.Second): // a hang guard; each blocked write holds for 10 minutes
		t.Fatal("Shutdown did not return at the end of its context")
	}
	for i := range conns {
		select {
		case <-cancelled:
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d held calls were cancelled", i, conns)
		}
	}
}

// TestAttackFramesAndEnds: a message split into thousands of continuation
// frames counts as one message against MaxMessage (close 1009 once past
// it); permessage-deflate is never negotiated, so no compressed frame can
// expand in the daemon; a binary frame is read as a message like a text
// one; a client that closes its connection, or only its sending side
// (half-closed TCP), cancels the calls the connection runs.
func TestAttackFramesAndEnds(t *testing.T) {
	f := newFaces(t, registry.Options{}, func(o *gatewayface.Options) { o.MaxMessage = 64 << 10 })
	cancelled, started := attackTools(t, f)

	// Compression asked for, not granted.
	d := websocket.Dialer{EnableCompression: true}
	gw, resp, err := d.Dial("ws"+strings.TrimPrefix(f.srv.URL, "http")+"/gateway", authHdr())
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if ext := resp.Header.Get("Sec-WebSocket-Extensions"); ext != "" {
		t.Errorf("the upgrade granted %q", ext)
	}
	// A binary frame is a message.
	if err := gw.WriteMessage(websocket.BinaryMessage, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools.list"}`)); err != nil {
		t.Fatal(err)
	}
	_ = gw.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, b, err := gw.ReadMessage(); err != nil || !bytes.Contains(b, []byte(`"id":1,`)) {
		t.Errorf("a binary frame: %v %.200s", err, b)
	}
	// 20,000 frames of 4 bytes, 80,000 bytes in one message: past 64 KiB.
	raw := gw.NetConn()
	frame := func(op byte, fin bool, payload []byte) []byte {
		b0 := op
		if fin {
			b0 |= 0x80
		}
		out := []byte{b0, 0x80 | byte(len(payload)), 0, 0, 0, 0} // masked with a zero key
		return append(out, payload...)
	}
	var msg []byte
	msg = append(msg, frame(websocket.TextMessage, false, []byte(`[   `))...)
	for range 20000 {
		msg = append(msg, frame(0, false, []byte(`    `))...)
	}
	go func() { _, _ = raw.Write(msg) }()
	_, _, err = gw.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseMessageTooBig {
		t.Errorf("a message of 20,000 frames past MaxMessage: %v; want close 1009", err)
	}

	// A close, then a half-close, while a call runs.
	for _, end := range []string{"close", "half-close"} {
		gw := dialGateway(t, f.srv.URL, authHdr())
		if err := gw.WriteMessage(websocket.TextMessage, invoke(1, "hold")); err != nil {
			t.Fatal(err)
		}
		<-started
		if end == "close" {
			gw.Close()
		} else if err := gw.NetConn().(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-cancelled:
		case <-time.After(20 * time.Second): // a hang guard; the call holds for 10 minutes
			t.Errorf("%s: the connection's call runs on", end)
		}
	}
}

// TestAttackInflightPerAddress: the messages in flight of every connection
// of one client address count against its --max-inflight-per-ip, as its
// /mcp and /execute requests do: with a bound of 2 taken by two running
// calls on one connection, a message on a second connection from the same
// address is answered busy, naming the flag, and is served once they end.
// Each connection had only its own bound (8), and an address may open
// --max-connections-per-ip (128) connections.
func TestAttackInflightPerAddress(t *testing.T) {
	f := newFaces(t, registry.Options{}, func(o *gatewayface.Options) { o.Inflight = admit.NewInflight(2, 10*time.Millisecond) })
	cancelled, started := attackTools(t, f)
	a := dialGateway(t, f.srv.URL, authHdr())
	for id := range 2 {
		if err := a.WriteMessage(websocket.TextMessage, invoke(id, "hold")); err != nil {
			t.Fatal(err)
		}
		<-started
	}
	b := dialGateway(t, f.srv.URL, authHdr())
	read := func() rpcResp {
		t.Helper()
		if err := b.WriteMessage(websocket.TextMessage, []byte(`{"jsonrpc":"2.0","id":9,"method":"tools.invoke","params":{"toolId":"read","args":{"path":"a.txt"}}}`)); err != nil {
			t.Fatal(err)
		}
		_ = b.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, msg, err := b.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		var r rpcResp
		if err := json.Unmarshal(msg, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := read(); r.Error == nil || r.Error.Code != gatewayface.CodeBusy || !strings.Contains(r.Error.Message, "--max-inflight-per-ip") {
		t.Errorf("a message past the address's bound: %+v", r.Error)
	}
	a.Close()
	<-cancelled
	<-cancelled
	// The calls' slots are given back as their handlers end, just after.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := read()
		if r.Error == nil {
			break
		}
		if r.Error.Code != gatewayface.CodeBusy || time.Now().After(deadline) {
			t.Fatalf("once the calls ended: %+v", r.Error)
		}
	}
}

// TestAttackCloseReasonStaysUTF8: a wrong X-Root-Dir of multibyte
// characters, which the refusal names, is cut in the close reason on a
// rune boundary: the reason of a close frame must be valid UTF-8, and a
// client (a browser, gorilla) fails a connection whose reason is not, so
// it saw neither the 1008 nor the reason.
func TestAttackCloseReasonStaysUTF8(t *testing.T) {
	f := newFaces(t, registry.Options{})
	for _, pad := range []string{"", "a"} {
		hdr := authHdr()
		hdr.Set("X-Root-Dir", "/"+pad+strings.Repeat("é", 100))
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(f.srv.URL, "http")+"/gateway", hdr)
		if err != nil {
			t.Fatal(err)
		}
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err = ws.ReadMessage()
		ws.Close()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.ClosePolicyViolation || !strings.Contains(ce.Text, "é") {
			t.Errorf("a wrong root of %d bytes: %v; want close 1008 with its reason", len(pad)+201, err)
		}
	}
}

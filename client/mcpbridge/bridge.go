// Package mcpbridge carries an MCP session between stdio and a daemon's
// streamable HTTP endpoint (/mcp), for MCP clients that only spawn servers
// over stdio (Claude Desktop's config file, some IDE extensions) on a
// machine where the daemon cannot run (macOS, Windows): the daemon runs in
// a Linux VM or container, and agentbe-bridge (cmd/agentbe-bridge) runs
// beside the client.
//
// It is portable (no Linux imports) and knows nothing of MCP's methods:
// each newline-delimited JSON-RPC message read from stdin is POSTed to the
// endpoint with the bearer token, and each message of the answer (a JSON
// body, or the events of a text/event-stream) is written to stdout as one
// line. The session id (Mcp-Session-Id) and the protocol version the
// server chose at initialize (MCP-Protocol-Version) are sent on every later
// request, as the streamable HTTP transport asks. An HTTP failure answers
// the request that met it with a JSON-RPC error naming the status and the
// URL, so the client shows the cause (a wrong token says 401) rather than
// waiting.
//
// A daemon whose token is rotated (SIGHUP re-reads --auth-token-file,
// docs/configuration.md "Rotating a token") refuses the token it replaced
// with 401. A bridge given the token's file (Options.TokenFile) then reads
// the file once more, and when it holds a different token sends the
// refused request with that token and keeps it, so the client that spawned
// the bridge keeps working across a rotation. A daemon with --mcp-sessions
// also ends the sessions of the replaced token and answers a request in an
// ended session with 404, without running it. On that 404 the bridge opens
// a session of its own with the client's initialize and
// notifications/initialized, which it keeps for this (the daemon's answer
// to them is not passed on), and sends the request in that session, once
// (Bridge.renew).
package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
)

// Defaults of Options.
const (
	DefaultMaxInFlight  = 16
	DefaultMaxMessage   = 16 << 20
	DefaultTimeout      = 10 * time.Minute
	deleteSessionBudget = 5 * time.Second
)

// Options configure Run.
type Options struct {
	// URL is the daemon's MCP endpoint, http(s)://host:port/mcp.
	URL string
	// Token is sent as "Authorization: Bearer <Token>" when not empty.
	Token string
	// TokenFile, when set, is the file that holds the token (read at the
	// start when Token is empty). When the daemon refuses a request with
	// 401 the bridge reads it again, once per refusal, and when it holds
	// another token sends that request again with it, once, and sends the
	// new token from then on; when it holds the refused token, or cannot
	// be read, or is empty, the request is answered with the 401 and what
	// the file held. A 401 is the daemon's answer before it reads the
	// request (internal/admit): nothing ran, so the one retry never runs a
	// call twice. No other answer is retried but the 404 of a session the
	// daemon ended (Bridge.renew).
	TokenFile string
	// Client makes the requests (its Transport carries TLS settings, such
	// as a CA for the daemon's certificate); http.DefaultClient when nil.
	// Run follows no redirect whatever its CheckRedirect says: the daemon
	// sends none, so a redirect is answered as an HTTP error, and a message,
	// the session id and the token go to URL only.
	Client *http.Client
	// MaxInFlight bounds the requests waiting for their answer, and
	// separately the notifications and responses being delivered (so that
	// the client's answer to a server's request, such as an elicitation,
	// never waits behind the requests that wait for it); reading stdin
	// pauses at the bound (DefaultMaxInFlight when 0).
	MaxInFlight int
	// MaxMessage bounds one message, read from stdin or from the daemon
	// (DefaultMaxMessage when 0): a longer one is answered with an error.
	MaxMessage int
	// Timeout bounds one request, its answer included (DefaultTimeout when
	// 0): a tool call may run long, a hung connection may not hold a slot
	// for ever.
	Timeout time.Duration
	// Errors receives one line per failure the client is not told about
	// (a notification that could not be delivered); nil discards them.
	Errors io.Writer
}

// Bridge is one session between a stdio pair and an endpoint.
type Bridge struct {
	opts Options
	out  io.Writer

	outMu sync.Mutex // one message written at a time

	renewMu sync.Mutex // one session renewal at a time

	mu        sync.Mutex
	sessionID string
	protocol  string
	initMsg   []byte // the client's initialize and notifications/initialized,
	initDone  []byte // sent again to open a new session (renew)
	token     string // the token sent: Options.Token, or what TokenFile held last
}

// Run carries messages from in to the endpoint and the answers to out
// until in ends (every request sent by then is answered first) or ctx is
// done. It returns nil at the end of in, else what stopped it.
func Run(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	if opts.URL == "" {
		return errors.New("mcpbridge: no URL")
	}
	hc := http.Client{}
	if opts.Client != nil {
		hc = *opts.Client
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opts.Client = &hc
	if opts.Token == "" && opts.TokenFile != "" {
		tok, err := ReadTokenFile(opts.TokenFile)
		if err != nil {
			return fmt.Errorf("mcpbridge: %w", err)
		}
		opts.Token = tok
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = DefaultMaxMessage
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	b := &Bridge{opts: opts, out: out, token: opts.Token}
	defer b.endSession()

	calls := make(chan struct{}, opts.MaxInFlight)
	others := make(chan struct{}, opts.MaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r, opts.MaxMessage)
		if len(line) > 0 || tooLong {
			if tooLong {
				b.reply(headID(line), fmt.Sprintf("message longer than %d bytes (the bridge's limit)", opts.MaxMessage), -32600)
			} else if msg := bytes.TrimSpace(line); len(msg) > 0 {
				slots := others
				if isCall(msg) {
					slots = calls
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return ctx.Err()
				}
				wg.Go(func() {
					defer func() { <-slots }()
					b.forward(ctx, msg)
				})
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// readLine reads one line of at most limit bytes; a longer one is consumed
// to its end and reported as tooLong, with line holding its first
// headBytes (where a request's id is), so that it can be answered.
func readLine(r *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		if !tooLong {
			n := len(line) + len(frag)
			if bytes.HasSuffix(frag, []byte("\n")) {
				n-- // the newline is not the message's (a last line may have none)
			}
			if n > limit {
				tooLong = true
				line = append(line, frag[:min(len(frag), max(0, headBytes-len(line)))]...)
				line = line[:min(len(line), headBytes)]
			} else {
				line = append(line, frag...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, tooLong, err
	}
}

// isCall reports whether msg is a request that waits for an answer (a
// method and an id), or a batch; anything else is delivered and done.
func isCall(msg []byte) bool {
	if msg[0] != '{' {
		return true
	}
	var env envelope
	if json.Unmarshal(msg, &env) != nil {
		return false // answered at once with a parse error
	}
	return env.Method != "" && len(env.ID) > 0 && string(env.ID) != "null"
}

// headBytes is how much of an oversized message is kept to find its id.
const headBytes = 1024

// idField is a JSON-RPC id near a message's start: a string or a number.
var idField = regexp.MustCompile(`"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9]+)`)

// headID is the id found in the start of a message that was too long to
// read whole, or nil: the client's request is answered rather than left
// waiting.
func headID(head []byte) json.RawMessage {
	if m := idField.FindSubmatch(head); m != nil {
		return json.RawMessage(m[1])
	}
	return nil
}

// envelope is what the bridge reads of a message: whether it is a request
// that expects an answer (an id and a method) and which method.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

// forward POSTs one message and writes what comes back.
func (b *Bridge) forward(ctx context.Context, msg []byte) {
	var env envelope
	if msg[0] == '{' {
		if err := json.Unmarshal(msg, &env); err != nil {
			b.reply(nil, "not a JSON-RPC message: "+err.Error(), -32700)
			return
		}
	} else if !json.Valid(msg) {
		b.reply(nil, "not a JSON-RPC message", -32700)
		return
	}
	id := env.ID
	if env.Method == "" || len(id) == 0 || string(id) == "null" {
		id = nil // a notification or a response: nothing to answer
	}
	switch env.Method {
	case "initialize":
		b.mu.Lock()
		b.initMsg = bytes.Clone(msg)
		b.mu.Unlock()
	case "notifications/initialized":
		b.mu.Lock()
		b.initDone = bytes.Clone(msg)
		b.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(ctx, b.opts.Timeout)
	defer cancel()
	resp, refused, err := b.send(ctx, http.MethodPost, msg)
	if err != nil {
		b.fail(id, err.Error())
		return
	}
	var renewErr error
	if old := resp.Request.Header.Get("Mcp-Session-Id"); resp.StatusCode == http.StatusNotFound && old != "" && env.Method != "" && env.Method != "initialize" {
		// The daemon (--mcp-sessions) no longer knows the session: a
		// rotation of its token ended it, or it idled out. It answers so
		// before it reads the request, which ran nothing: open a new
		// session as the client opened the first, and send the request
		// once more in it. A response (no method) answered a request of
		// the ended session, which no new session asks: it is not sent
		// again.
		if renewErr = b.renew(ctx, old); renewErr == nil {
			drain(resp)
			if resp, refused, err = b.send(ctx, http.MethodPost, msg); err != nil {
				b.fail(id, err.Error())
				return
			}
		}
	}
	defer resp.Body.Close()
	b.keepSession(resp)
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
		return
	case ct == "text/event-stream" && resp.StatusCode < 300:
		b.events(resp.Body, id, env.Method)
		return
	}
	body, tooLong := readBounded(resp.Body, b.opts.MaxMessage)
	if tooLong {
		b.fail(id, fmt.Sprintf("the answer of %s is longer than %d bytes (the bridge's limit)", b.opts.URL, b.opts.MaxMessage))
		return
	}
	if ct == "application/json" && isJSONRPC(body) {
		// A JSON-RPC answer, even with an error status (the server's
		// own error, which says more than the status).
		b.deliver(body, env.Method)
		return
	}
	if resp.StatusCode >= 300 {
		text := httpError(b.opts.URL, resp.StatusCode, body, refused, resp.Request.Header.Get("Mcp-Session-Id") != "")
		if renewErr != nil {
			text += "; " + renewErr.Error()
		}
		b.fail(id, text)
		return
	}
	if len(bytes.TrimSpace(body)) > 0 {
		b.fail(id, fmt.Sprintf("POST %s: an answer of type %q, not JSON-RPC", b.opts.URL, resp.Header.Get("Content-Type")))
	}
}

// keepSession keeps the session id resp gives.
func (b *Bridge) keepSession(resp *http.Response) {
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		b.mu.Lock()
		b.sessionID = s
		b.mu.Unlock()
	}
}

// drain reads a little of resp's body, so that its connection is kept,
// and closes it.
func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// renew opens a new session in place of old, which the daemon answered
// 404: it sends the client's initialize again, keeps the session id of
// the answer (the answer itself the client has had), and then the
// client's notifications/initialized. Requests that met the 404 together
// renew once: one that finds another session than old in force uses it.
func (b *Bridge) renew(ctx context.Context, old string) error {
	b.renewMu.Lock()
	defer b.renewMu.Unlock()
	b.mu.Lock()
	cur, init, done := b.sessionID, b.initMsg, b.initDone
	b.mu.Unlock()
	if cur != old {
		return nil
	}
	if init == nil {
		return fmt.Errorf("the daemon ended the MCP session and there is no initialize to open another")
	}
	resp, err := b.do(ctx, http.MethodPost, init, b.currentToken(), true)
	if err != nil {
		return fmt.Errorf("opening a new MCP session: %w", err)
	}
	defer drain(resp)
	s := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || s == "" {
		return fmt.Errorf("opening a new MCP session: POST %s: initialize answered %s without a session", b.opts.URL, resp.Status)
	}
	b.keepSession(resp)
	if done == nil {
		done = []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	}
	resp, _, err = b.send(ctx, http.MethodPost, done)
	if err != nil {
		return fmt.Errorf("opening a new MCP session: %w", err)
	}
	drain(resp)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("opening a new MCP session: POST %s: notifications/initialized answered %s", b.opts.URL, resp.Status)
	}
	return nil
}

// send sends one request (msg is its body, nil for none) with the current
// token. On a 401, with a TokenFile, it reads the file again once (reread)
// and, when the file now holds another token, sends the request once more
// with it: the daemon answers 401 at admission, before it reads the body
// (internal/admit), so the refused request ran nothing and sending it
// again cannot run it twice. It never sends a third time. When the answer
// is a 401 it is returned with refused, what to tell the client about the
// token (its file named), else "".
func (b *Bridge) send(ctx context.Context, method string, msg []byte) (*http.Response, string, error) {
	tok := b.currentToken()
	resp, err := b.do(ctx, method, msg, tok, false)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || b.opts.TokenFile == "" {
		return resp, "", err
	}
	next, why := b.reread(tok)
	if next == "" {
		return resp, why, nil
	}
	drain(resp)
	resp, err = b.do(ctx, method, msg, next, false)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, "", err
	}
	return resp, fmt.Sprintf("the daemon wants its token: it refused the one --token-file %s held, and then the one it holds now", b.opts.TokenFile), nil
}

// reread is the token to send again after the daemon refused refused: the
// bridge's current one if another request has already moved on from
// refused, else what TokenFile holds now when that differs (read once, and
// kept for the requests to come). It returns "" and why when there is no
// other token to try.
func (b *Bridge) reread(refused string) (next, why string) {
	b.mu.Lock()
	cur := b.token
	b.mu.Unlock()
	if cur != refused {
		return cur, ""
	}
	tok, err := ReadTokenFile(b.opts.TokenFile)
	if err != nil {
		return "", "the daemon wants its token, and " + err.Error()
	}
	if tok == refused {
		return "", fmt.Sprintf("the daemon wants its token: it refused the one in --token-file %s, read again after the refusal (not the daemon's --auth-token-file, or the daemon was not sent SIGHUP since the file changed)", b.opts.TokenFile)
	}
	b.mu.Lock()
	if b.token == refused {
		b.token = tok
	}
	b.mu.Unlock()
	return tok, ""
}

// ReadTokenFile reads a token file as the daemon does: its content
// without surrounding whitespace. An unreadable or empty file is an error
// that names it, and so is one that is not a regular file (a FIFO would
// hold the bridge) or is over opfile.MaxTokenFile.
func ReadTokenFile(name string) (string, error) {
	data, err := opfile.ReadRegular(name, opfile.MaxTokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file cannot be read: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("--token-file %s is empty", name)
	}
	return tok, nil
}

// currentToken is the token to send now.
func (b *Bridge) currentToken() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.token
}

// do sends one request with tok; fresh sends it outside the session (a
// new initialize).
func (b *Bridge) do(ctx context.Context, method string, msg []byte, tok string, fresh bool) (*http.Response, error) {
	var body io.Reader
	if msg != nil {
		body = bytes.NewReader(msg)
	}
	req, err := http.NewRequestWithContext(ctx, method, b.opts.URL, body)
	if err != nil {
		return nil, err
	}
	b.headers(req, tok)
	if fresh {
		req.Header.Del("Mcp-Session-Id")
	}
	if msg != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	resp, err := b.opts.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", method, b.opts.URL, err)
	}
	return resp, nil
}

// headers sets the token and the session's headers on req.
func (b *Bridge) headers(req *http.Request, tok string) {
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sessionID != "" {
		req.Header.Set("Mcp-Session-Id", b.sessionID)
	}
	if b.protocol != "" {
		req.Header.Set("MCP-Protocol-Version", b.protocol)
	}
}

// events writes each data event of a text/event-stream as one message.
func (b *Bridge) events(body io.Reader, id json.RawMessage, method string) {
	r := bufio.NewReaderSize(body, 64<<10)
	var data bytes.Buffer
	answered := false
	for {
		line, tooLong, err := readLine(r, b.opts.MaxMessage)
		if tooLong {
			b.fail(id, fmt.Sprintf("an event from %s is longer than %d bytes (the bridge's limit)", b.opts.URL, b.opts.MaxMessage))
			return
		}
		l := strings.TrimRight(string(line), "\r\n")
		switch {
		case l == "" && len(line) > 0: // the end of an event
			if data.Len() > 0 {
				b.deliver(data.Bytes(), method)
				answered = true
				data.Reset()
			}
		case strings.HasPrefix(l, "data:"):
			if data.Len()+len(l) > b.opts.MaxMessage {
				b.fail(id, fmt.Sprintf("an event from %s is longer than %d bytes (the bridge's limit)", b.opts.URL, b.opts.MaxMessage))
				return
			}
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(l, "data:"), " "))
		}
		if err != nil {
			if data.Len() > 0 {
				b.deliver(data.Bytes(), method)
				answered = true
			}
			switch {
			case answered:
			case err != io.EOF:
				b.fail(id, fmt.Sprintf("reading the answer of %s: %v", b.opts.URL, err))
			default:
				b.fail(id, fmt.Sprintf("the event stream of %s ended without an answer", b.opts.URL))
			}
			return
		}
	}
}

// deliver writes one message from the server as a line; the answer to
// initialize also tells the bridge the protocol version to send.
func (b *Bridge) deliver(msg []byte, method string) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, msg); err != nil {
		b.logf("dropped a message from %s that is not JSON: %v", b.opts.URL, err)
		return
	}
	if method == "initialize" {
		var res struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal(compact.Bytes(), &res) == nil && res.Result.ProtocolVersion != "" {
			b.mu.Lock()
			b.protocol = res.Result.ProtocolVersion
			b.mu.Unlock()
		}
	}
	compact.WriteByte('\n')
	b.outMu.Lock()
	defer b.outMu.Unlock()
	if _, err := b.out.Write(compact.Bytes()); err != nil {
		b.logf("writing to stdout: %v", err)
	}
}

// fail answers the request id with an error; a message without an id (a
// notification, a response) has nobody to tell but the log.
func (b *Bridge) fail(id json.RawMessage, text string) {
	if id == nil {
		b.logf("%s", text)
		return
	}
	b.reply(id, text, -32603)
}

// reply writes a JSON-RPC error for id (null when nil).
func (b *Bridge) reply(id json.RawMessage, text string, code int) {
	if id == nil {
		id = json.RawMessage("null")
	}
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": "agentbe-bridge: " + text}})
	b.deliver(msg, "")
}

func (b *Bridge) logf(format string, args ...any) {
	if b.opts.Errors != nil {
		fmt.Fprintf(b.opts.Errors, "agentbe-bridge: "+format+"\n", args...)
	}
}

// endSession asks the server to end a session it gave an id, as the
// transport asks a client that leaves; best effort, in a short time.
func (b *Bridge) endSession() {
	b.mu.Lock()
	id := b.sessionID
	b.mu.Unlock()
	if id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deleteSessionBudget)
	defer cancel()
	if resp, _, err := b.send(ctx, http.MethodDelete, nil); err == nil {
		resp.Body.Close()
	}
}

// readBounded reads r up to max bytes; tooLong when there was more.
func readBounded(r io.Reader, max int) ([]byte, bool) {
	b, _ := io.ReadAll(io.LimitReader(r, int64(max)+1))
	if len(b) > max {
		return nil, true
	}
	return b, false
}

// isJSONRPC reports whether body is a JSON-RPC message or a batch of them.
func isJSONRPC(body []byte) bool {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || !json.Valid(body) {
		return false
	}
	if body[0] == '[' {
		return true
	}
	var m struct {
		JSONRPC string `json:"jsonrpc"`
	}
	return json.Unmarshal(body, &m) == nil && m.JSONRPC == "2.0"
}

// httpError is the message for an HTTP status the daemon answered with,
// with the hint that fixes the usual cause; refused, when set, is what the
// token file held after a 401 (Bridge.send), said instead of the hint;
// inSession tells that the request carried a session id.
func httpError(url string, status int, body []byte, refused string, inSession bool) string {
	text := fmt.Sprintf("POST %s: %d %s", url, status, http.StatusText(status))
	if s := strings.TrimSpace(string(body)); s != "" {
		text += ": " + clip.String(s, 300)
	}
	switch {
	case status == http.StatusUnauthorized && refused != "":
		text += " (" + refused + ")"
	case status == http.StatusUnauthorized:
		text += " (the daemon wants its token: --token-file FILE, or AGENTBE_AUTH_TOKEN)"
	case status == http.StatusNotFound && inSession:
		// The daemon's --mcp-sessions: an unknown session id gets 404.
		text += " (the daemon no longer knows this MCP session: it ends when the daemon's token is rotated, after --mcp-session-idle-timeout, or when the daemon restarts; restart the MCP server in the client if the bridge cannot open a new one)"
	case status == http.StatusNotFound:
		text += " (the URL should end in /mcp)"
	}
	return text
}

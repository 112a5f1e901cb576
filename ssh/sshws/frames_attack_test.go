package sshws

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	gossh "golang.org/x/crypto/ssh"
)

// frame is one client WebSocket frame (masked, as RFC 6455 requires of a
// client), with the header it declares: length may differ from the
// payload sent, for a frame that claims more than it carries.
func frame(op byte, fin bool, rsv1 bool, length uint64, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	if rsv1 {
		b0 |= 0x40
	}
	h := []byte{b0}
	switch {
	case length < 126:
		h = append(h, 0x80|byte(length))
	case length <= 0xffff:
		h = append(h, 0x80|126, byte(length>>8), byte(length))
	default:
		h = append(h, 0x80|127)
		h = binary.BigEndian.AppendUint64(h, length)
	}
	key := [4]byte{1, 2, 3, 4}
	h = append(h, key[:]...)
	for i, c := range payload {
		h = append(h, c^key[i%4])
	}
	return h
}

const (
	opCont   = 0
	opText   = 1
	opBinary = 2
	opClose  = 8
	opPing   = 9
)

// rawConn is the client side of /ssh as a net.Conn whose writes are sent
// as frames the test chooses (split, interleaved with pings, text or
// binary), and whose reads are the server's messages.
type rawConn struct {
	ws      *websocket.Conn
	raw     net.Conn
	split   func(p []byte, n int) []byte // the frames that carry the n-th write
	mu      sync.Mutex
	n       int
	r       io.Reader
	readErr error // the error that ended the reads (the server's close)
}

func dialRaw(t *testing.T, url string, h http.Header) (*rawConn, *http.Response) {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(url, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	// The test writes frames itself: gorilla must not answer pings under it.
	ws.SetPingHandler(func(string) error { return nil })
	return &rawConn{ws: ws, raw: ws.UnderlyingConn()}, resp
}

func (c *rawConn) Read(p []byte) (int, error) {
	for {
		if c.r == nil {
			_, r, err := c.ws.NextReader()
			if err != nil {
				c.readErr = err
				return 0, err
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if err == io.EOF {
			c.r = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (c *rawConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if _, err := c.raw.Write(c.split(p, c.n)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *rawConn) Close() error                       { return c.ws.Close() }
func (c *rawConn) LocalAddr() net.Addr                { return c.raw.LocalAddr() }
func (c *rawConn) RemoteAddr() net.Addr               { return c.raw.RemoteAddr() }
func (c *rawConn) SetDeadline(t time.Time) error      { return c.raw.SetDeadline(t) }
func (c *rawConn) SetReadDeadline(t time.Time) error  { return c.raw.SetReadDeadline(t) }
func (c *rawConn) SetWriteDeadline(t time.Time) error { return c.raw.SetWriteDeadline(t) }

func sshOver(t *testing.T, c net.Conn) *gossh.Client {
	t.Helper()
	cc, chans, reqs, err := gossh.NewClientConn(c, "ws", &gossh.ClientConfig{
		User: "agent", Auth: []gossh.AuthMethod{gossh.Password("agent")}, HostKeyCallback: gossh.InsecureIgnoreHostKey(),
	})
	if err != nil {
		t.Fatal(err)
	}
	client := gossh.NewClient(cc, chans, reqs)
	t.Cleanup(func() { client.Close() })
	return client
}

// serverCloseCode reads until the server's close frame and returns its code.
func serverCloseCode(t *testing.T, ws *websocket.Conn) int {
	t.Helper()
	ws.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard
	for {
		if _, _, err := ws.NextReader(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce.Code
			}
			t.Fatalf("no close frame: %v", err)
		}
	}
}

// TestAttackWebSocketFrames: what a client may do to /ssh's framing. Any
// fragmentation, text or binary, pings between fragments and a million
// empty fragments carry the SSH stream as it is; a frame or message over
// 4 MiB ends the connection with 1009 before its payload arrives; frames
// after the client's close are not read; compression is not negotiated and
// a compressed frame is a protocol error; a subprotocol is not chosen.
func TestAttackWebSocketFrames(t *testing.T) {
	e := newEnv(t)

	t.Run("one byte a fragment, text and binary, pings between", func(t *testing.T) {
		c, _ := dialRaw(t, e.url, nil)
		c.split = func(p []byte, n int) []byte {
			op := byte(opBinary)
			if n%2 == 0 {
				op = opText // SSH bytes are not UTF-8: the server must not care
			}
			var out []byte
			for i := range p {
				if i > 0 {
					op = opCont
				}
				out = append(out, frame(op, i == len(p)-1, false, 1, p[i:i+1])...)
				out = append(out, frame(opPing, true, false, 3, []byte("png"))...)
			}
			return out
		}
		if out, _, code, _ := run(t, sshOver(t, c), "echo ok", ""); out != "ok\n" || code != 0 {
			t.Fatalf("%q %d", out, code)
		}
	})

	t.Run("a million empty fragments", func(t *testing.T) {
		c, _ := dialRaw(t, e.url, nil)
		runtime.GC()
		var m0 runtime.MemStats
		runtime.ReadMemStats(&m0)
		empty := frame(opCont, false, false, 0, nil)
		c.split = func(p []byte, n int) []byte {
			if n != 1 {
				return frame(opBinary, true, false, uint64(len(p)), p)
			}
			out := frame(opBinary, false, false, 0, nil)
			out = append(out, repeatFrame(empty, 1_000_000)...)
			return append(out, frame(opCont, true, false, uint64(len(p)), p)...)
		}
		if out, _, code, _ := run(t, sshOver(t, c), "echo ok", ""); out != "ok\n" || code != 0 {
			t.Fatalf("%q %d", out, code)
		}
		runtime.GC()
		var m1 runtime.MemStats
		runtime.ReadMemStats(&m1)
		t.Logf("a million empty fragments (6 MB of frames): heap %+.1f MiB", (float64(m1.HeapAlloc)-float64(m0.HeapAlloc))/(1<<20))
	})

	for _, tc := range []struct {
		name   string
		frames [][]byte
	}{
		{"a 100 MiB frame", [][]byte{frame(opBinary, true, false, 100<<20, []byte("SSH-2.0-x\r\n"))}},
		{"a 2^63 frame", [][]byte{frame(opBinary, true, false, 1<<63-1, nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := dialRaw(t, e.url, nil)
			go func() {
				for _, f := range tc.frames {
					if _, err := c.raw.Write(f); err != nil {
						return
					}
				}
			}()
			if code := serverCloseCode(t, c.ws); code != websocket.CloseMessageTooBig {
				t.Fatalf("close code %d, want 1009", code)
			}
		})
	}

	t.Run("one message of every write, past 4 MiB", func(t *testing.T) {
		// The whole SSH stream as one message that never ends: the limit
		// counts its fragments together.
		c, _ := dialRaw(t, e.url, nil)
		c.split = func(p []byte, n int) []byte {
			op := byte(opCont)
			if n == 1 {
				op = opBinary
			}
			return frame(op, false, false, uint64(len(p)), p)
		}
		client := sshOver(t, c)
		s, err := client.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		s.Stdin = strings.NewReader(strings.Repeat("x", 5<<20))
		if err := s.Run("cat >/dev/null"); err == nil {
			t.Fatal("5 MiB went through in one WebSocket message")
		}
		var ce *websocket.CloseError
		if !errors.As(c.readErr, &ce) || ce.Code != websocket.CloseMessageTooBig {
			t.Fatalf("the connection ended with %v, want close 1009", c.readErr)
		}
	})

	t.Run("data after the client's close", func(t *testing.T) {
		c, _ := dialRaw(t, e.url, nil)
		c.split = func(p []byte, _ int) []byte { return frame(opBinary, true, false, uint64(len(p)), p) }
		client := sshOver(t, c)
		if out, _, _, _ := run(t, client, "echo ok", ""); out != "ok\n" {
			t.Fatalf("%q", out)
		}
		c.mu.Lock() // the SSH client's writes wait from here on
		if _, err := c.raw.Write(frame(opClose, true, false, 2, []byte{0x03, 0xe8})); err != nil {
			t.Fatal(err)
		}
		// Keep sending: 64 MiB of data frames after the close. The server
		// stops reading and drops the connection; these writes then fail.
		chunk := frame(opBinary, true, false, 64<<10, make([]byte, 64<<10))
		done := make(chan error, 1)
		go func() {
			for range 1024 {
				if _, err := c.raw.Write(chunk); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		c.raw.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard
		_, err := io.Copy(io.Discard, c.raw)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the server kept the connection 30 s after the client's close")
		}
		c.mu.Unlock()
		c.raw.Close()
		<-done
	})

	t.Run("a ping flood that never reads its pongs", func(t *testing.T) {
		// The pongs back up once the socket's buffers fill; the write that
		// cannot finish breaks the connection's write side, and the next
		// keepalive ping finds it so and closes it: the flood holds one
		// connection, not the daemon's memory, and not for ever.
		e := newEnv(t, withOpts(func(o *Options) { o.KeepaliveInterval = 300 * time.Millisecond }))
		c, _ := dialRaw(t, e.url, nil)
		c.split = func(p []byte, _ int) []byte { return frame(opBinary, true, false, uint64(len(p)), p) }
		client := sshOver(t, c)
		if out, _, _, _ := run(t, client, "echo ok", ""); out != "ok\n" {
			t.Fatalf("%q", out)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		ping := frame(opPing, true, false, 125, make([]byte, 125))
		batch := repeatFrame(ping, 1000)
		c.raw.SetWriteDeadline(time.Now().Add(30 * time.Second)) // a hang guard
		sent := 0
		for range 200 {
			if _, err := c.raw.Write(batch); err != nil {
				break
			}
			sent += 1000
		}
		t.Logf("%d pings of 125 bytes sent without reading a pong", sent)
		c.raw.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard
		_, err := io.Copy(io.Discard, c.raw)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the server still held the connection 30 s after the flood")
		}
	})

	t.Run("compression and subprotocols", func(t *testing.T) {
		d := websocket.Dialer{EnableCompression: true, Subprotocols: []string{"ssh", "binary"}}
		ws, resp, err := d.Dial(e.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		if ext := resp.Header.Get("Sec-WebSocket-Extensions"); ext != "" {
			t.Errorf("the server negotiated %q", ext)
		}
		if p := resp.Header.Get("Sec-WebSocket-Protocol"); p != "" {
			t.Errorf("the server chose subprotocol %q", p)
		}
		// A frame marked compressed anyway is a protocol error.
		ws.SetPingHandler(func(string) error { return nil })
		if _, err := ws.UnderlyingConn().Write(frame(opBinary, true, true, 4, []byte("SSH-"))); err != nil {
			t.Fatal(err)
		}
		if code := serverCloseCode(t, ws); code != websocket.CloseProtocolError {
			t.Fatalf("close code %d, want 1002", code)
		}
	})
}

// repeatFrame is f repeated n times.
func repeatFrame(f []byte, n int) []byte { return []byte(strings.Repeat(string(f), n)) }

package wsnet

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
)

// wsPair serves handler over a real WebSocket and returns a client for it
// (one connection per pair).
func wsPair(t *testing.T, handler func(c *Conn), dialer *websocket.Dialer) *websocket.Conn {
	t.Helper()
	done := make(chan struct{})
	hts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		c := New(ws)
		defer c.Close()
		handler(c)
	}))
	if dialer == nil {
		dialer = websocket.DefaultDialer
	}
	ws, _, err := dialer.Dial("ws"+strings.TrimPrefix(hts.URL, "http"), nil)
	if err != nil {
		hts.Close()
		t.Fatal(err)
	}
	// hts.Close does not wait for hijacked connections; done does.
	t.Cleanup(func() { ws.Close(); hts.Close(); <-done })
	return ws
}

func TestWSConnStream(t *testing.T) {
	// The server echoes the stream back, one message per Read.
	echo := func(c *Conn) { io.Copy(c, c) }

	t.Run("binary, text, empty and fragmented messages are one stream", func(t *testing.T) {
		// A tiny client write buffer makes gorilla fragment the message.
		ws := wsPair(t, echo, &websocket.Dialer{WriteBufferSize: 16})
		ws.WriteMessage(websocket.BinaryMessage, []byte("bin|"))
		ws.WriteMessage(websocket.TextMessage, []byte("text|"))
		ws.WriteMessage(websocket.BinaryMessage, nil)
		big := bytes.Repeat([]byte("0123456789"), 1000)
		w, _ := ws.NextWriter(websocket.BinaryMessage)
		w.Write(big[:5000])
		w.Write(big[5000:])
		w.Close()
		want := "bin|text|" + string(big)
		var got []byte
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		for len(got) < len(want) {
			typ, p, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("after %d bytes: %v", len(got), err)
			}
			if typ != websocket.BinaryMessage {
				t.Fatalf("server sent message type %d, want binary", typ)
			}
			got = append(got, p...)
		}
		if string(got) != want {
			t.Fatal("stream mangled")
		}
	})

	t.Run("a message over the read limit closes with 1009", func(t *testing.T) {
		ws := wsPair(t, echo, nil)
		ws.WriteMessage(websocket.BinaryMessage, make([]byte, maxMessageSize+1))
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		for {
			_, _, err := ws.ReadMessage()
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				if ce.Code != websocket.CloseMessageTooBig {
					t.Fatalf("close code %d", ce.Code)
				}
				return
			}
			if err != nil {
				t.Fatalf("read: %v", err)
			}
		}
	})

	t.Run("concurrent writers never interleave a write", func(t *testing.T) {
		const writers, msgs, size = 8, 200, 300
		ws := wsPair(t, func(c *Conn) {
			var wg sync.WaitGroup
			for i := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := bytes.Repeat([]byte{byte('a' + i)}, size)
					for range msgs {
						if _, err := c.Write(p); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
		}, nil)
		// Writes may be coalesced into fewer messages, but the stream is
		// whole writes one after another.
		var stream []byte
		ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		for len(stream) < writers*msgs*size {
			typ, p, err := ws.ReadMessage()
			if err != nil {
				t.Fatalf("after %d bytes: %v", len(stream), err)
			}
			if typ != websocket.BinaryMessage {
				t.Fatalf("message type %d", typ)
			}
			stream = append(stream, p...)
		}
		counts := map[byte]int{}
		for off := 0; off < len(stream); off += size {
			w := stream[off : off+size]
			if bytes.Count(w, w[:1]) != size {
				t.Fatalf("write at %d interleaved: %q", off, w)
			}
			counts[w[0]]++
		}
		for i := range writers {
			if counts[byte('a'+i)] != msgs {
				t.Fatalf("writer %d: %d writes", i, counts[byte('a'+i)])
			}
		}
	})

	t.Run("queued data is sent before the close frame", func(t *testing.T) {
		ws := wsPair(t, func(c *Conn) {
			for range 100 {
				c.Write(bytes.Repeat([]byte("q"), 10000))
			}
			c.CloseWith(CloseNormal, "done")
		}, nil)
		n := 0
		ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		for {
			_, p, err := ws.ReadMessage()
			if err != nil {
				if !websocket.IsCloseError(err, CloseNormal) || n != 1000000 {
					t.Fatalf("got %d bytes then %v", n, err)
				}
				break
			}
			n += len(p)
		}
	})

	t.Run("Close unblocks a writer stuck on a peer that stopped reading", func(t *testing.T) {
		closed := make(chan struct{})
		ws := wsPair(t, func(c *Conn) {
			werr := make(chan error, 1)
			go func() {
				chunk := make([]byte, 64<<10)
				for { // far more than the socket buffers hold: blocks
					if _, err := c.Write(chunk); err != nil {
						werr <- err
						return
					}
				}
			}()
			time.Sleep(100 * time.Millisecond)
			c.Close()
			if err := <-werr; err == nil {
				t.Error("blocked Write returned no error")
			}
			close(closed)
		}, nil)
		<-closed // the client never reads
		_ = ws
	})

	t.Run("close is idempotent and reads EOF after", func(t *testing.T) {
		done := make(chan struct{})
		ws := wsPair(t, func(c *Conn) {
			if err := c.CloseWith(CloseNormal, "bye"); err != nil {
				t.Error(err)
			}
			c.Close()
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Error("read after close succeeded")
			}
			if _, err := c.Write([]byte("x")); err == nil {
				t.Error("write after close succeeded")
			}
			close(done)
		}, nil)
		_, _, err := ws.ReadMessage()
		if !websocket.IsCloseError(err, CloseNormal) {
			t.Fatalf("client saw %v", err)
		}
		<-done
	})

	t.Run("deadlines", func(t *testing.T) {
		ws := wsPair(t, func(c *Conn) {
			c.SetDeadline(time.Now().Add(20 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			var ne interface{ Timeout() bool }
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("read past the deadline: %v", err)
			}
		}, nil)
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		ws.ReadMessage() // until the server closes
	})
}

// TestCloseReasonReachesThePeer: a reason longer than a control frame
// holds, and one whose cut would fall inside a character, still reach the
// peer with their code, cut on a character boundary (a reason past 123
// bytes made gorilla refuse the frame, so no close frame was sent), and a
// reason that is not UTF-8 reaches it made valid.
func TestCloseReasonReachesThePeer(t *testing.T) {
	for name, reason := range map[string]string{
		"long":      "Invalid scope: " + strings.Repeat("x", 300),
		"multibyte": "Invalid scope: " + strings.Repeat("é", 100),
	} {
		t.Run(name, func(t *testing.T) {
			ws := wsPair(t, func(c *Conn) { c.CloseWith(4003, reason) }, nil)
			ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _, err := ws.ReadMessage()
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				t.Fatalf("want a close frame, got %v", err)
			}
			if ce.Code != 4003 || !strings.HasPrefix(ce.Text, "Invalid scope: ") || len(ce.Text) > 123 || !utf8.ValidString(ce.Text) || !strings.HasSuffix(ce.Text, "…") {
				t.Errorf("close %d %q (%d bytes); want 4003 with the reason cut to 123 bytes, valid UTF-8", ce.Code, ce.Text, len(ce.Text))
			}
		})
	}
	// A reason quoting bytes that are not UTF-8 (a client's X-Scope-Path)
	// reaches the peer too, made valid: gorilla, as RFC 6455 asks, fails
	// the connection on a close frame whose reason is not.
	ws := wsPair(t, func(c *Conn) { c.CloseWith(4003, "Invalid scope: a\xffb") }, nil)
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := ws.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != 4003 || ce.Text != "Invalid scope: a\uFFFDb" {
		t.Errorf("a reason that is not UTF-8: %v; want close 4003 %q", err, "Invalid scope: a\uFFFDb")
	}
}

// FuzzCloseFrame: whatever the code and reason, the close frame fits a
// control frame (125 bytes), carries the code, and a reason that is valid
// UTF-8 (RFC 6455), the start of the reason made valid, cut only with
// clip's marker; and gorilla's reader takes it as a close frame with that
// code and text.
func FuzzCloseFrame(f *testing.F) {
	for _, r := range []string{"", "Unauthorized", "Invalid scope: " + strings.Repeat("é", 100), "Invalid scope: a\xffb", "\xed\xa0\x80", strings.Repeat("x", 300)} {
		f.Add(uint16(4003), r)
	}
	f.Add(uint16(1000), "bye")
	f.Fuzz(func(t *testing.T, code uint16, reason string) {
		c := 3000 + int(code)%2000 // the codes a server may send: 3000-4999 (1000-1011 are covered by the seeds' 4003 alike)
		if code == 1000 {
			c = 1000
		}
		b := CloseFrame(c, reason)
		if len(b) > 125 || len(b) < 2 {
			t.Fatalf("CloseFrame(%d, %q): %d bytes", c, reason, len(b))
		}
		text := string(b[2:])
		if got := int(b[0])<<8 | int(b[1]); got != c {
			t.Fatalf("CloseFrame(%d, %q): code %d", c, reason, got)
		}
		if !utf8.ValidString(text) {
			t.Fatalf("CloseFrame(%d, %q): reason %q is not UTF-8", c, reason, text)
		}
		valid := strings.ToValidUTF8(reason, "\uFFFD")
		if text != valid && !(strings.HasSuffix(text, "…") && strings.HasPrefix(valid, strings.TrimSuffix(text, "…"))) {
			t.Fatalf("CloseFrame(%d, %q): reason %q", c, reason, text)
		}
		// Gorilla's reader on a raw close frame: FIN, opcode 8, unmasked
		// (the client's reader of a server's frame).
		frame := append([]byte{0x88, byte(len(b))}, b...)
		_, _, err := readAsClient(t, frame).ReadMessage()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != c || ce.Text != text {
			t.Fatalf("CloseFrame(%d, %q) read by gorilla: %v", c, reason, err)
		}
	})
}

// readAsClient is a gorilla client connection whose server (over a pipe)
// completes the handshake and then sends frames.
func readAsClient(t *testing.T, frames []byte) *websocket.Conn {
	cli, srv := net.Pipe()
	t.Cleanup(func() { cli.Close(); srv.Close() })
	go func() {
		req, err := http.ReadRequest(bufio.NewReader(srv))
		if err != nil {
			return
		}
		sum := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		srv.Write(append([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "+
			base64.StdEncoding.EncodeToString(sum[:])+"\r\n\r\n"), frames...))
		io.Copy(io.Discard, srv) // the client's answering close frame
	}()
	d := websocket.Dialer{NetDial: func(string, string) (net.Conn, error) { return cli, nil }, ReadBufferSize: 1024, WriteBufferSize: 1024}
	ws, _, err := d.Dial("ws://pipe/", nil)
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

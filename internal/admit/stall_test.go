package admit

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// stallServer serves h behind ReplyDeadline(d) and reports when each
// handler returned, with the error of its last write.
func stallServer(t *testing.T, d time.Duration, h func(w http.ResponseWriter, r *http.Request) error) (string, <-chan error) {
	t.Helper()
	done := make(chan error, 8)
	srv := httptest.NewServer(ReplyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done <- h(w, r)
	}), d))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), done
}

// send writes req on a new connection; a small receive buffer makes a
// reply that nobody reads fill the sockets sooner.
func send(t *testing.T, addr, req string, smallBuffer bool) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if smallBuffer {
		c.(*net.TCPConn).SetReadBuffer(4096)
	}
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

const getReq = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

// TestReplyDeadlineLetsAStalledReaderGo: a client that reads nothing of a
// reply larger than the sockets hold does not keep its handler: the write
// fails once the client has taken nothing for the stall timeout, in one
// write and in many small flushed ones (an SSE stream) alike.
func TestReplyDeadlineLetsAStalledReaderGo(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 16<<20)
	for name, h := range map[string]func(http.ResponseWriter, *http.Request) error{
		"one write": func(w http.ResponseWriter, r *http.Request) error {
			_, err := w.Write(big)
			return err
		},
		"flushed events": func(w http.ResponseWriter, r *http.Request) error {
			rc := http.NewResponseController(w)
			for i := 0; i < len(big)/1024; i++ {
				if _, err := w.Write(big[:1024]); err != nil {
					return err
				}
				if err := rc.Flush(); err != nil {
					return err
				}
			}
			return nil
		},
	} {
		addr, done := stallServer(t, 200*time.Millisecond, h)
		send(t, addr, getReq, true)
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: 16 MiB written to a client that reads nothing", name)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: the handler still writes to a client that has read nothing for a minute", name)
		}
	}
}

// TestReplyDeadlineSparesTheLiving: a quiet reply (a stream with nothing
// to say, a long call) is not cut, a slow client that keeps reading gets
// a reply of any size, a connection serves its next request, and a
// handshake takes the connection over with no deadline left on it.
func TestReplyDeadlineSparesTheLiving(t *testing.T) {
	const d = 200 * time.Millisecond
	payload := bytes.Repeat([]byte("y"), 1<<20)
	addr, done := stallServer(t, d, func(w http.ResponseWriter, r *http.Request) error {
		switch r.URL.Path {
		case "/quiet":
			time.Sleep(5 * d)
			_, err := io.WriteString(w, "late")
			return err
		case "/hijack":
			c, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return err
			}
			defer c.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\n\r\n")
			brw.Flush()
			time.Sleep(5 * d) // nobody reads; no deadline may be left
			_, err = c.Write([]byte("still here"))
			return err
		}
		_, err := w.Write(payload)
		return err
	})
	c := send(t, addr, "GET /quiet HTTP/1.1\r\nHost: x\r\n\r\nGET /big HTTP/1.1\r\nHost: x\r\n\r\n", false)
	br := bufio.NewReader(c)
	for i, want := range []int{4, len(payload)} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(i, err)
		}
		var got int
		for {
			// A slow reader: small reads, each well within d.
			buf := make([]byte, 32<<10)
			n, err := resp.Body.Read(buf)
			got += n
			if err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond) // the whole reply takes longer than d
		}
		resp.Body.Close()
		if got != want {
			t.Errorf("reply %d: %d bytes, want %d", i, got, want)
		}
		if err := <-done; err != nil {
			t.Errorf("reply %d: %v", i, err)
		}
	}
	h := send(t, addr, "GET /hijack HTTP/1.1\r\nHost: x\r\n\r\n", true)
	if err := <-done; err != nil {
		t.Errorf("a hijacked connection's later write: %v", err)
	}
	b, _ := io.ReadAll(h)
	if !strings.Contains(string(b), "still here") {
		t.Errorf("hijacked connection read %q", b)
	}
}

// Command previewsrv is the server the previews tests start as a workspace
// process (built by internal/previewtest): it listens on -addr (with
// -freebind, an address this machine does not have), prints
// "listening on PORT", and serves
//
//	/         "hello from <tag>"
//	/bytes?n= n bytes of 'x'
//	/echo     a WebSocket that sends each message back
//	/dump     the request as it arrived (method, URI, Host, every header,
//	          the body's length), with the answer shaped by the query:
//	          set=Name:Value (repeatable) a response header, hint=1 a 103
//	          Early Hints first, status=N the status, stream=1 the body in
//	          flushed pieces (no length), trailer=1 a trailer X-Sum after it
//	/raw      b= (URL-decoded) written as it is on the connection, taken
//	          over from net/http, in place of an answer; then the
//	          connection is closed, or with hold=1 read until the client
//	          closes it (a server that answers wrongly, or never)
//	/forever  a body that never ends, in 32 KiB pieces, until a write fails
//	/hints    103 Early Hints answers that never end, until a write fails
//	/conns    "open=N accepted=M": the connections open now (the one
//	          asking left out) and accepted since the start
//	/gather   n= requests held until n of them are held at once, then
//	          each answered "gathered" (connections opened together)
//	/duplex   a bidirectional stream: the answer's header (200, no
//	          length) at once, before any of the body is read, then each
//	          piece of the body sent back as it is read, flushed
//
// With -leader-exit the main thread ends once the server listens, and the
// others serve on: /proc then shows the process as a zombie with no
// namespace, descriptors or socket table of its own, though it holds its
// listener. It prints "main thread ended" once /proc shows that.
//
// /raw with drop=1, after its answer, reads the next request on the
// connection and closes it without answering: a kept connection that the
// server closes just as it is reused.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// init keeps the main goroutine on the main thread under -leader-exit (the
// flag is not parsed yet), so that it is the main thread that exits.
func init() {
	if slices.Contains(os.Args[1:], "-leader-exit") {
		runtime.LockOSThread()
	}
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	leaderExit := flag.Bool("leader-exit", false, "end the main thread once listening; serve on the others")
	tag := flag.String("tag", "the workspace", "what / says it is")
	freebind := flag.Bool("freebind", false, "bind with IP_FREEBIND: an address that is not this machine's")
	flag.Parse()
	var lc net.ListenConfig
	if *freebind {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_FREEBIND, 1) })
			return errors.Join(err, serr)
		}
	}
	l, err := lc.Listen(context.Background(), "tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %d\n", l.Addr().(*net.TCPAddr).Port)
	cl := &countListener{Listener: l}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s at %s", *tag, r.URL.RequestURI())
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = w.Write([]byte(strings.Repeat("x", n)))
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		// What arrived of an Authorization header, by its canonical key:
		// the tests check the daemon's token never reaches the workspace's
		// server. (This server checks no token; that is internal/httpguard's.)
		fmt.Fprintf(w, "host=%s authorization=%q prefix=%s forwarded-host=%s", r.Host, strings.Join(r.Header[http.CanonicalHeaderKey("authorization")], ","),
			r.Header.Get("X-Forwarded-Prefix"), r.Header.Get("X-Forwarded-Host"))
	})
	mux.HandleFunc("/dump", dump)
	mux.HandleFunc("/raw", func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = brw.WriteString(r.URL.Query().Get("b"))
		_ = brw.Flush()
		if r.URL.Query().Get("hold") == "1" {
			_, _ = io.Copy(io.Discard, brw)
		}
		if r.URL.Query().Get("drop") == "1" {
			// The next request's header, then the connection closed.
			for {
				line, err := brw.ReadString('\n')
				if err != nil || line == "\r\n" {
					return
				}
			}
		}
	})
	mux.HandleFunc("/conns", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "open=%d accepted=%d", cl.open.Load()-1, cl.accepted.Load())
	})
	var g gather
	mux.HandleFunc("/gather", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		g.wait(n)
		io.WriteString(w, "gathered")
	})
	mux.HandleFunc("/duplex", func(w http.ResponseWriter, r *http.Request) {
		// Full duplex, or net/http would read (discard) the body before
		// sending the header, and the client waits for the header first.
		rc := http.NewResponseController(w)
		if err := rc.EnableFullDuplex(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		if rc.Flush() != nil {
			return
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/hints", func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		for {
			if _, err := brw.WriteString("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"); err != nil {
				return
			}
			if err := brw.Flush(); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/forever", func(w http.ResponseWriter, r *http.Request) {
		piece := []byte(strings.Repeat("x", 32<<10))
		for {
			if _, err := w.Write(piece); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			t, m, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(t, m); err != nil {
				return
			}
		}
	})
	if *leaderExit {
		go func() { _ = http.Serve(cl, mux) }()
		go func() {
			for {
				if b, err := os.ReadFile("/proc/self/stat"); err == nil {
					if i := bytes.LastIndexByte(b, ')'); i > 0 && bytes.HasPrefix(b[i+1:], []byte(" Z")) {
						fmt.Println("main thread ended")
						return
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		// SYS_EXIT ends the calling thread alone (exit_group ends all).
		// Through Syscall, not RawSyscall: the runtime takes the thread's
		// P back from a system call that never returns.
		_, _, _ = syscall.Syscall(syscall.SYS_EXIT, 0, 0, 0)
	}
	_ = http.Serve(cl, mux)
}

// countListener counts the connections it accepted and those still open.
type countListener struct {
	net.Listener
	open, accepted atomic.Int64
}

func (l *countListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	l.accepted.Add(1)
	return &countConn{Conn: c, l: l}, nil
}

type countConn struct {
	net.Conn
	l    *countListener
	once sync.Once
}

func (c *countConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// gather holds requests until n are held at once.
type gather struct {
	mu   sync.Mutex
	held int
	open chan struct{}
}

func (g *gather) wait(n int) {
	g.mu.Lock()
	if g.open == nil {
		g.open = make(chan struct{})
	}
	ch := g.open
	g.held++
	if g.held >= n {
		close(ch)
		g.held, g.open = 0, nil
	}
	g.mu.Unlock()
	<-ch
}

// dump answers /dump (see the package comment).
func dump(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s\nhost=%s\n", r.Method, r.RequestURI, r.Proto, r.Host)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, r.Header[k])
	}
	fmt.Fprintf(&b, "te=%q body=%d\n", r.TransferEncoding, len(body))
	q := r.URL.Query()
	if q.Get("hint") == "1" {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
	}
	for _, kv := range q["set"] {
		k, v, _ := strings.Cut(kv, ":")
		w.Header().Add(k, v)
	}
	if q.Get("trailer") == "1" {
		w.Header().Set("Trailer", "X-Sum")
	}
	status := http.StatusOK
	if n, err := strconv.Atoi(q.Get("status")); err == nil {
		status = n
	}
	w.WriteHeader(status)
	out := b.String()
	if q.Get("stream") == "1" {
		for len(out) > 0 {
			n := min(16, len(out))
			io.WriteString(w, out[:n])
			w.(http.Flusher).Flush()
			out = out[n:]
		}
	} else {
		io.WriteString(w, out)
	}
	if q.Get("trailer") == "1" {
		w.Header().Set("X-Sum", strconv.Itoa(len(b.String())))
	}
}

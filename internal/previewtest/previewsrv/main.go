// Command previewsrv is the server the previews tests start as a workspace
// process (built by internal/previewtest): it listens on -addr, prints
// "listening on PORT", and serves
//
//	/         "hello from <tag>"
//	/bytes?n= n bytes of 'x'
//	/echo     a WebSocket that sends each message back
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/gorilla/websocket"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	tag := flag.String("tag", "the workspace", "what / says it is")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %d\n", l.Addr().(*net.TCPAddr).Port)
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
	_ = http.Serve(l, mux)
}

package browser

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProxyRules: the session's proxy carries plain http only when allowed,
// never tunnels to port 80 without it, and refuses what netguard refuses;
// it forwards what the rules admit.
func TestProxyRules(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	defer srv.Close()
	for _, allowHTTP := range []bool{false, true} {
		var mu sync.Mutex
		var refusals []string
		// Port 80 of loopback is admitted by the rules (nothing listens
		// there): only the proxy's own rule refuses a tunnel to it.
		g, err := startProxy(allowing(t, srv.URL, "http://127.0.0.1:80").Dial, allowHTTP, false, os.Getuid(), func(target string, err error) {
			mu.Lock()
			refusals = append(refusals, target)
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		pu, _ := url.Parse("http://" + g.addr())
		tr := &http.Transport{Proxy: http.ProxyURL(pu)}
		client := &http.Client{Transport: tr}
		resp, err := client.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if allowHTTP && (resp.StatusCode != 200 || string(body) != "hello") {
			t.Errorf("allowed http: %d %s", resp.StatusCode, body)
		}
		if !allowHTTP && resp.StatusCode != http.StatusForbidden {
			t.Errorf("http without allowHTTP: %d %s", resp.StatusCode, body)
		}
		tunnel := func(target string) string {
			c, err := net.Dial("tcp", g.addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
			line, _ := bufio.NewReader(c).ReadString('\n')
			return strings.TrimSpace(line)
		}
		host := strings.TrimPrefix(srv.URL, "http://")
		for target, want := range map[string]string{
			host: "200",
			strings.Replace(host, "127.0.0.1", "127.0.0.2", 1): "403",
			"169.254.169.254:443":                              "403",
			"localhost:443":                                    "403",
			"127.0.0.1:80":                                     map[bool]string{true: "502", false: "403"}[allowHTTP],
			// Port 80 written with a leading zero is port 80 to the dialler.
			"127.0.0.1:0080": map[bool]string{true: "502", false: "403"}[allowHTTP],
		} {
			if got := tunnel(target); !strings.Contains(got, " "+want+" ") {
				t.Errorf("allowHTTP=%v CONNECT %s: %q; want %s", allowHTTP, target, got, want)
			}
		}
		tr.CloseIdleConnections()
		g.close()
		// The refused address, the metadata address, localhost; without
		// allowHTTP also the http request and the two tunnels to port 80.
		mu.Lock()
		if want := map[bool]int{true: 3, false: 6}[allowHTTP]; len(refusals) != want {
			t.Errorf("allowHTTP=%v: refusals reported: %v; want %d", allowHTTP, refusals, want)
		}
		mu.Unlock()
	}
}

// TestProxyServesOnlyTheBrowsersUser: a connection from a process of
// another user than the browser's is closed unanswered, and reported.
func TestProxyServesOnlyTheBrowsersUser(t *testing.T) {
	refused := make(chan string, 1)
	g, err := startProxy(allowing(t, "http://127.0.0.1:443").Dial, true, false, os.Getuid()+1, func(target string, err error) { refused <- err.Error() })
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	c, err := net.Dial("tcp", g.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n")
	if line, err := bufio.NewReader(c).ReadString('\n'); err == nil {
		t.Errorf("another user's connection was answered: %q", line)
	}
	if why := <-refused; !strings.Contains(why, "not the browser's") {
		t.Errorf("refusal: %s", why)
	}
}

// TestProxyConnectionsBounded: a process of Chromium's user (the daemon's
// own when it is not root) that opens tunnels and holds them, or keeps
// connections alive after a request, gets at most maxProxyConns of them;
// the one past the bound is closed unanswered and reported, and a place
// freed by a closed tunnel is taken again. A tunnel still carries bytes
// both ways and half-closes.
func TestProxyConnectionsBounded(t *testing.T) {
	defer func(n int) { maxProxyConns = n }(maxProxyConns)
	maxProxyConns = 8
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() { echo.Close(); wg.Wait() }()
	wg.Go(func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { io.Copy(c, c); c.Close() })
		}
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") }))
	defer srv.Close()
	var mu sync.Mutex
	var refusals []string
	g, err := startProxy(allowing(t, "http://"+echo.Addr().String(), srv.URL).Dial, true, false, os.Getuid(), func(target string, err error) {
		mu.Lock()
		refusals = append(refusals, err.Error())
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	open := func(first string) (net.Conn, *bufio.Reader, string) {
		c, err := net.Dial("tcp", g.addr())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(c, first)
		r := bufio.NewReader(c)
		line, _ := r.ReadString('\n')
		return c, r, strings.TrimSpace(line)
	}
	connect := "CONNECT " + echo.Addr().String() + " HTTP/1.1\r\nHost: " + echo.Addr().String() + "\r\n\r\n"
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// Half tunnels, half kept-alive plain requests.
	for i := range maxProxyConns {
		first := connect
		if i%2 == 1 {
			first = "GET " + srv.URL + "/ HTTP/1.1\r\nHost: " + strings.TrimPrefix(srv.URL, "http://") + "\r\n\r\n"
		}
		c, _, line := open(first)
		held = append(held, c)
		if !strings.Contains(line, " 200 ") {
			t.Fatalf("connection %d: %q", i, line)
		}
	}
	c, _, line := open(connect)
	c.Close()
	if line != "" {
		t.Errorf("the connection past the bound was answered: %q", line)
	}
	mu.Lock()
	if len(refusals) != 1 || !strings.Contains(refusals[0], "holds 8 connections") {
		t.Errorf("refusals: %q", refusals)
	}
	mu.Unlock()
	// A tunnel closed gives its place back (once the proxy has seen it
	// close); the new tunnel carries bytes both ways.
	held[0].Close()
	held = held[1:]
	for attempt := 0; ; attempt++ {
		c, r, line := open(connect)
		if strings.Contains(line, " 200 ") {
			held = append(held, c)
			r.ReadString('\n') // the blank line that ends the proxy's answer
			fmt.Fprint(c, "ping")
			c.(*net.TCPConn).CloseWrite()
			if b, _ := io.ReadAll(r); string(b) != "ping" {
				t.Errorf("the tunnel carried %q", b)
			}
			break
		}
		c.Close()
		if attempt == 200 {
			t.Fatalf("no place freed after a tunnel was closed: %q", line)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Package previewtest gives the previews tests a server to run as a
// workspace process: previewsrv, built once per test process (static, so
// it runs inside a bubblewrap sandbox too) and copied into a workspace.
package previewtest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	once  sync.Once
	built string
	err   error
)

// Name is the program's name in the workspace.
const Name = "previewsrv"

// Install copies previewsrv into dir (a workspace's root) and returns its
// command, "./previewsrv".
func Install(tb testing.TB, dir string) string {
	tb.Helper()
	once.Do(build)
	if err != nil {
		tb.Fatal(err)
	}
	b, rerr := os.ReadFile(built)
	if rerr != nil {
		tb.Fatal(rerr)
	}
	if werr := os.WriteFile(filepath.Join(dir, Name), b, 0o755); werr != nil {
		tb.Fatal(werr)
	}
	return "./" + Name
}

// Cleanup removes what Install built; call it from TestMain after m.Run.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

var dir string

func build() {
	d, e := os.MkdirTemp("", "agentbe-previewsrv-")
	if e != nil {
		err = e
		return
	}
	dir = d
	built = filepath.Join(dir, Name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", built, "github.com/agentbe/agentbe-daemon/internal/previewtest/previewsrv")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, e := cmd.CombinedOutput(); e != nil {
		err = fmt.Errorf("go build previewsrv: %v\n%s", e, out)
	}
}

// ReadPort reads previewsrv's "listening on PORT" line from r (its
// stdout), within a minute.
func ReadPort(tb testing.TB, r io.Reader) int {
	tb.Helper()
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		ch <- res{line, err}
	}()
	select {
	case got := <-ch:
		p, ok := strings.CutPrefix(strings.TrimSpace(got.line), "listening on ")
		n, err := strconv.Atoi(p)
		if !ok || err != nil {
			tb.Fatalf("previewsrv said %q (%v)", got.line, got.err)
		}
		return n
	case <-time.After(time.Minute):
		tb.Fatal("previewsrv did not say where it listens within a minute")
	}
	return 0
}

// HostServer starts an HTTP server on the host's loopback that answers
// every request with body, and stops it when the test ends: a server the
// test runs itself, which no workspace process opened, so previews must
// refuse it. It returns the port.
func HostServer(tb testing.TB, body string) int {
	tb.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })}
	go srv.Serve(l)
	tb.Cleanup(func() { srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

//go:build linux

package previews

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/internal/previewtest"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

func TestMain(m *testing.M) {
	sandboxexec.Main() // the landlock mode's trampoline: its commands run through this binary
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		previewtest.Cleanup()
		os.Exit(code)
	}))
}

// newProvider is a previews provider on a new executor of mode (see
// newExecutor), closed when the test ends.
func newProvider(t testing.TB, mode sandbox.Mode) (*Previews, sandbox.Executor, string) {
	t.Helper()
	ex, root := newExecutor(t, mode)
	p, err := New(Options{Executor: ex})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, ex, root
}

// newExecutor is a real executor in mode over a fresh workspace; under
// bwrap its commands get their own network namespace (NoNetwork), under
// landlock they keep TCP (NoNetwork would refuse their bind).
func newExecutor(t testing.TB, mode sandbox.Mode) (sandbox.Executor, string) {
	t.Helper()
	if mode == sandbox.ModeBwrap {
		testenv.Bwrap(t)
	}
	root := t.TempDir()
	ex, err := sandbox.New(sandbox.Config{Mode: mode, WorkspaceRoot: root, NoNetwork: mode == sandbox.ModeBwrap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	if ex.Mode() != mode {
		t.Fatalf("executor runs in %s, want %s", ex.Mode(), mode)
	}
	return ex, root
}

// startServer starts previewsrv as a workspace command (in dir below the
// workspace root, with args) and returns the port it listens on. The test's
// end kills it.
func startServer(t testing.TB, ex sandbox.Executor, root, dir, args string) int {
	t.Helper()
	bin := previewtest.Install(t, root)
	req := sandbox.Request{Command: bin + " " + args}
	if dir != root {
		// A scope's command: the program is its own copy there.
		req.Boundary = dir
		previewtest.Install(t, dir)
	}
	pr, pw := io.Pipe()
	proc, err := ex.Start(context.Background(), req, sandbox.Stdio{Stdout: pw})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = proc.Signal("KILL")
		_, _ = proc.Wait()
		pw.Close()
		wg.Wait()
	})
	port := previewtest.ReadPort(t, pr)
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, pr) }()
	return port
}

// get sends GET path over c and returns the body.
func get(t *testing.T, c net.Conn, path string) string {
	t.Helper()
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(string(b), "\r\n\r\n")
	return body
}

// TestPreviewDial, in both namespaces (software and landlock share the
// daemon's, bwrap has its own): a workspace server is reached; a
// loopback server of the host's, a scope that did not start the server, a
// closed port and one over the cap are refused, each with its error; every
// connection is recorded.
func TestPreviewDial(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ModeSoftware, sandbox.ModeLandlock, sandbox.ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			ex, root := newExecutor(t, mode)
			var mu sync.Mutex
			var recs []Record
			p, err := New(Options{Executor: ex, MaxConns: 2, Opened: func(r Record) { mu.Lock(); recs = append(recs, r); mu.Unlock() }})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			ctx := context.Background()
			host := previewtest.HostServer(t, "hello from the host")
			if _, err := p.Dial(ctx, Caller{}, host); !errors.Is(err, ErrNotWorkspacePort) {
				t.Fatalf("nothing runs yet: dial %d: %v", host, err)
			}

			port := startServer(t, ex, root, root, "-tag workspace")
			ports := p.Ports("")
			if len(ports) != 1 || ports[0].Port != port {
				t.Fatalf("Ports = %+v, want just %d", ports, port)
			}
			c, err := p.Dial(ctx, Caller{Face: "http", Within: root}, port)
			if err != nil {
				t.Fatal(err)
			}
			if body := get(t, c, "/x"); body != "hello from workspace at /x" {
				t.Fatalf("got %q", body)
			}
			if _, err := p.Dial(ctx, Caller{}, host); !errors.Is(err, ErrNotWorkspacePort) || !strings.Contains(err.Error(), fmt.Sprintf("port %d", host)) {
				t.Fatalf("the host's server: %v", err)
			}
			if _, err := p.Dial(ctx, Caller{Within: filepath.Join(root, "elsewhere")}, port); !errors.Is(err, ErrNotWorkspacePort) {
				t.Fatalf("a scope that did not start the server: %v", err)
			}
			if _, err := p.Dial(ctx, Caller{}, 0); !errors.Is(err, ErrBadTarget) {
				t.Fatalf("port 0: %v", err)
			}

			// The cap: two held, the third refused, one closed, room again.
			c1, err1 := p.Dial(ctx, Caller{}, port)
			c2, err2 := p.Dial(ctx, Caller{}, port)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if _, err := p.Dial(ctx, Caller{}, port); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "limit 2") {
				t.Fatalf("over the cap: %v", err)
			}
			c1.Close()
			c3, err := p.Dial(ctx, Caller{}, port)
			if err != nil {
				t.Fatalf("after a close: %v", err)
			}
			c2.Close()
			c3.Close()

			mu.Lock()
			var ok, refused int
			for _, r := range recs {
				switch {
				case r.Outcome == "ok" && r.Port == port && r.Duration > 0:
					ok++
					if r.Face == "http" && (r.BytesIn == 0 || r.BytesOut == 0) {
						t.Errorf("the GET's record counts no bytes: %+v", r)
					}
				case r.Outcome == "refused" && r.Err != nil:
					refused++
				}
			}
			mu.Unlock()
			if ok != 4 || refused != 5 {
				t.Errorf("records: %d ok, %d refused, want 4 and 5: %+v", ok, refused, recs)
			}
		})
	}
}

// TestPreviewDialEntersTheSandboxNamespace: under bwrap a workspace server
// listens on the very port a host server holds on the host's loopback (its
// namespace has its own); Dial reaches the workspace's, not the host's.
func TestPreviewDialEntersTheSandboxNamespace(t *testing.T) {
	p, ex, root := newProvider(t, sandbox.ModeBwrap)
	host := previewtest.HostServer(t, "hello from the host")
	port := startServer(t, ex, root, root, fmt.Sprintf("-addr 127.0.0.1:%d -tag sandbox", host))
	if port != host {
		t.Fatalf("listening on %d, asked %d", port, host)
	}
	c, err := p.Dial(context.Background(), Caller{}, port)
	if err != nil {
		t.Fatal(err)
	}
	if body := get(t, c, "/"); body != "hello from sandbox at /" {
		t.Fatalf("reached %q, want the sandbox's server", body)
	}
	// The threads that entered the namespace ended with their goroutines:
	// the daemon's own namespace (its main thread's) is unchanged however
	// often, and the host's server is still what the daemon reaches.
	for range 50 {
		c, err := p.Dial(context.Background(), Caller{}, port)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if ns, err := netnsOf("self"); err != nil || ns != p.selfNS {
		t.Fatalf("the daemon's namespace changed: %d, was %d (%v)", ns, p.selfNS, err)
	}
	direct, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", host))
	if err != nil {
		t.Fatal(err)
	}
	if body := get(t, direct, "/"); body != "hello from the host" {
		t.Fatalf("the daemon now reaches %q on its own loopback", body)
	}
}

// TestPreviewScopes: a server started by a command of a scope is reachable
// from that scope and from the whole workspace, not from a sibling scope.
func TestPreviewScopes(t *testing.T) {
	p, root, a, b, port := scopedServer(t)
	for within, reach := range map[string]bool{root: true, "": true, a: true, b: false, filepath.Join(a, "sub"): false, root + "a": false} {
		c, err := p.Dial(context.Background(), Caller{Within: within}, port)
		if reach != (err == nil) {
			t.Errorf("within %q: %v, want reachable %v", within, err, reach)
		}
		if c != nil {
			c.Close()
		}
	}
}

// TestReachable: a connection the daemon opens to loopback by another way
// (the browser under --browser-allow-local) is judged by Dial's rule for a
// workspace command's port: reached from the command's scope or above it,
// by a caller that may run commands; refused to another scope, a
// sub-scope, and a caller without exec. A port no workspace command
// listens on is none of the workspace's (nil: the caller's own rules
// decide), as is a port out of range refused as a bad target.
func TestReachable(t *testing.T) {
	p, root, a, b, port := scopedServer(t)
	for _, tc := range []struct {
		within string
		exec   bool
		want   error
	}{
		{root, true, nil}, {"", true, nil}, {a, true, nil},
		{b, true, ErrNotTheCallers}, {filepath.Join(a, "sub"), true, ErrNotTheCallers}, {root + "a", true, ErrNotTheCallers},
		{a, false, ErrNotTheCallers}, {root, false, ErrNotTheCallers},
	} {
		if err := p.Reachable(tc.within, tc.exec, port); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("within %q, exec %v: %v; want %v", tc.within, tc.exec, err, tc.want)
		}
	}
	host := previewtest.HostServer(t, "the host's")
	for _, within := range []string{b, ""} {
		if err := p.Reachable(within, false, host); err != nil {
			t.Errorf("a host server's port, within %q without exec: %v", within, err)
		}
	}
	if err := p.Reachable(a, true, 0); !errors.Is(err, ErrBadTarget) {
		t.Errorf("port 0: %v", err)
	}
}

func TestPreviewClose(t *testing.T) {
	p, ex, root := newProvider(t, sandbox.ModeSoftware)
	port := startServer(t, ex, root, root, "")
	c, err := p.Dial(context.Background(), Caller{}, port)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close()
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection outlived Close")
	}
	if _, err := p.Dial(context.Background(), Caller{}, port); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

func mkdir(d string) error { return os.MkdirAll(d, 0o755) }

// TestPreviewDialAddresses: a server bound to a wildcard or to IPv6
// loopback is reached where it listens, in both namespaces.
func TestPreviewDialAddresses(t *testing.T) {
	addrs := []string{"0.0.0.0:0"}
	if l, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Logf("no IPv6 loopback on this machine (%v): IPv4 only", err)
	} else {
		l.Close()
		addrs = append(addrs, "[::1]:0", "[::]:0")
	}
	for _, mode := range []sandbox.Mode{sandbox.ModeSoftware, sandbox.ModeLandlock, sandbox.ModeBwrap} {
		for _, addr := range addrs {
			t.Run(string(mode)+"/"+addr, func(t *testing.T) {
				p, ex, root := newProvider(t, mode)
				port := startServer(t, ex, root, root, "-addr "+addr)
				c, err := p.Dial(context.Background(), Caller{}, port)
				if err != nil {
					t.Fatal(err)
				}
				if body := get(t, c, "/"); body != "hello from the workspace at /" {
					t.Fatalf("got %q", body)
				}
			})
		}
	}
}

// TestPreviewDialNeedsCapSysAdmin: on a thread without CAP_SYS_ADMIN
// (capabilities are per thread: the test drops it from one it then lets
// Go end), entering a sandbox's namespace fails saying what is missing.
func TestPreviewDialNeedsCapSysAdmin(t *testing.T) {
	p, ex, root := newProvider(t, sandbox.ModeBwrap)
	port := startServer(t, ex, root, root, "")
	ports := p.Ports("")
	if len(ports) != 1 || ports[0].ns == p.selfNS {
		t.Fatalf("want one port in a namespace of its own: %+v", ports)
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", ports[0].Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	done := make(chan dialResult, 1)
	var drop func()
	drop = func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if unix.Gettid() == unix.Getpid() {
			// Not the main thread, which Go never ends: hold it while
			// another goroutine does the work (as enterAndDial does).
			held := make(chan struct{})
			go func() { drop(); close(held) }()
			<-held
			runtime.UnlockOSThread() // unchanged: its capabilities were not touched
			return
		}
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- dialResult{nil, err}
			return
		}
		data[0].Effective &^= 1 << unix.CAP_SYS_ADMIN
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- dialResult{nil, err}
			return
		}
		done <- setnsAndDial(context.Background(), fd, fmt.Sprintf("127.0.0.1:%d", port))
	}
	go drop()
	r := <-done
	if r.c != nil {
		r.c.Close()
	}
	if !errors.Is(r.err, ErrNamespace) || !strings.Contains(r.err.Error(), "needs CAP_SYS_ADMIN") {
		t.Fatalf("without CAP_SYS_ADMIN: %v", r.err)
	}
}

// scopedServer starts a provider and, from a command of scope a (root/a),
// a server on port; b (root/b) is a sibling scope. All end with the test.
func scopedServer(t *testing.T) (p *Previews, root, a, b string, port int) {
	t.Helper()
	p, ex, root := newProvider(t, sandbox.ModeSoftware)
	a, b = filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		if err := mkdir(d); err != nil {
			t.Fatal(err)
		}
	}
	return p, root, a, b, startServer(t, ex, root, a, "")
}

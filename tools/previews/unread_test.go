//go:build linux

package previews

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/previewtest"
	"github.com/agentbe/agentbe-daemon/internal/procnet"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// logged is a slog.Handler that keeps the warnings it is given.
type logged struct {
	mu    sync.Mutex
	warns []string
}

func (l *logged) Enabled(context.Context, slog.Level) bool { return true }
func (l *logged) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logged) WithGroup(string) slog.Handler            { return l }
func (l *logged) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.warns = append(l.warns, b.String())
	l.mu.Unlock()
	return nil
}

func (l *logged) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.warns, "\n")
}

// brokenTables makes every socket table unreadable, as err, until the test
// ends.
func brokenTables(t *testing.T, err error) {
	old := listenersOf
	listenersOf = func(int) (v4, v6 []procnet.Listener, _ error) { return nil, nil, err }
	t.Cleanup(func() { listenersOf = old })
}

// TestReachableFailsClosed: when the socket table of the namespace that
// workspace processes share with the daemon cannot be read whole (a line
// that does not parse, one over procnet's bound, a read that fails), a
// connection to a workspace command's port is refused (ErrUnjudged, naming
// the process and why), not taken for a port no workspace process listens
// on; a host server's port too, for a caller bound to a scope or without
// commands (whose it is cannot be told), and a warning is logged. A
// caller of the whole workspace that may run commands, who may reach
// every port, is not refused. Processes that all ended meanwhile (every
// table gone) are no failure: nothing of theirs listens. A listing leaves
// the namespace out and says so in the log.
func TestReachableFailsClosed(t *testing.T) {
	p, root, a, b, port := scopedServer(t)
	log := &logged{}
	p.log = slog.New(log)
	host := previewtest.HostServer(t, "the host's")
	if err := p.Reachable(b, true, port); !errors.Is(err, ErrNotTheCallers) {
		t.Fatalf("tables read: %v; want %v", err, ErrNotTheCallers)
	}

	brokenTables(t, errors.New("/proc/1/net/tcp: line 7: 3 fields, want at least 10"))
	for _, tc := range []struct {
		within string
		exec   bool
		port   int
	}{
		{b, true, port}, {a, false, port}, {root, false, port}, {a, true, port}, {b, false, host}, {root, true, host},
	} {
		err := p.Reachable(tc.within, tc.exec, tc.port)
		if !errors.Is(err, ErrUnjudged) || !strings.Contains(err.Error(), "line 7: 3 fields") || !strings.Contains(err.Error(), "the daemon's network namespace") || !strings.Contains(err.Error(), "workspace pids ") {
			t.Errorf("within %q, exec %v, port %d, table unreadable: %v; want %v naming the pid and the table's error", tc.within, tc.exec, tc.port, err, ErrUnjudged)
		}
	}
	if err := p.Reachable("", true, port); err != nil {
		t.Errorf("the whole workspace's caller with exec: %v", err)
	}
	if w := log.all(); !strings.Contains(w, "could not be read") || !strings.Contains(w, "line 7: 3 fields") {
		t.Errorf("no warning about the unreadable table; logged:\n%s", w)
	}
	if ports := p.Ports(""); len(ports) != 0 {
		t.Errorf("a listing through unreadable tables: %v", ports)
	}
	if w := log.all(); !strings.Contains(w, "left out") {
		t.Errorf("the listing does not say it left a namespace out; logged:\n%s", w)
	}

	brokenTables(t, fmt.Errorf("/proc/1/net/tcp: %w", fs.ErrNotExist))
	if err := p.Reachable(b, true, port); err != nil {
		t.Errorf("every process ended (no table): %v; want nil", err)
	}
}

// startLeaderExit starts previewsrv -leader-exit as a command of scope dir
// and returns its port once its main thread has ended.
func startLeaderExit(t *testing.T, ex sandbox.Executor, root, dir string) int {
	t.Helper()
	bin := previewtest.Install(t, root)
	req := sandbox.Request{Command: bin + " -leader-exit"}
	if dir != root {
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
	lines := make(chan string, 8) // previewsrv says two
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(lines)
		br := bufio.NewReader(pr)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			select {
			case lines <- strings.TrimSpace(line):
			default: // more than previewsrv says: not read
			}
		}
	}()
	port := 0
	for port == 0 {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("previewsrv ended")
			}
			if _, err := fmt.Sscanf(line, "listening on %d", &port); err != nil {
				t.Fatalf("previewsrv said %q", line)
			}
		case <-time.After(time.Minute):
			t.Fatal("previewsrv did not say where it listens within a minute")
		}
	}
	select {
	case line := <-lines:
		if line != "main thread ended" {
			t.Fatalf("previewsrv said %q", line)
		}
	case <-time.After(time.Minute):
		t.Fatal("previewsrv's main thread did not end within a minute")
	}
	return port
}

// TestZombieLeaderIsSeen: a workspace process whose main thread has ended
// while its other threads serve shows no namespace, descriptors or socket
// table under /proc/PID (the main thread is a zombie); its threads show
// them. Its port is the workspace's all the same: listed, reached from its
// scope, and, in the daemon's namespace (the software mode), refused to
// another scope and to a caller without commands.
func TestZombieLeaderIsSeen(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ModeSoftware, sandbox.ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			p, ex, root := newProvider(t, mode)
			a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
			for _, d := range []string{a, b} {
				if err := mkdir(d); err != nil {
					t.Fatal(err)
				}
			}
			port := startLeaderExit(t, ex, root, a)
			found := false
			for _, pt := range p.Ports("") {
				found = found || pt.Port == port
			}
			if !found {
				t.Errorf("port %d not listed: %v", port, p.Ports(""))
			}
			c, err := p.Dial(context.Background(), Caller{Within: a}, port)
			if err != nil {
				t.Fatalf("from its scope: %v", err)
			}
			if body := get(t, c, "/"); !strings.HasPrefix(body, "hello from the workspace") {
				t.Errorf("got %q", body)
			}
			if mode != sandbox.ModeSoftware {
				return // its own namespace: not at the daemon's loopback
			}
			if err := p.Reachable(a, true, port); err != nil {
				t.Errorf("from its scope: %v", err)
			}
			for _, tc := range []struct {
				within string
				exec   bool
			}{{b, true}, {a, false}} {
				if err := p.Reachable(tc.within, tc.exec, port); !errors.Is(err, ErrNotTheCallers) {
					t.Errorf("within %q, exec %v: %v; want %v", tc.within, tc.exec, err, ErrNotTheCallers)
				}
			}
		})
	}
}

// TestReachableFailsClosedOnDescriptors: when the descriptors of a
// workspace process in the daemon's namespace cannot be listed while a
// listener on the port is unaccounted for, the port is refused
// (ErrUnjudged, naming the pid), not taken for one no workspace process
// holds: a workspace command's port, and a host server's for a caller
// bound to a scope or without commands.
func TestReachableFailsClosedOnDescriptors(t *testing.T) {
	p, root, _, b, port := scopedServer(t)
	host := previewtest.HostServer(t, "the host's")
	notADir := notADirectory(t, "fd")
	old := fdDir
	fdDir = func(int) string { return notADir + "/" }
	t.Cleanup(func() { fdDir = old })
	refusedUnjudged(t, p, root, b, port, host, "its descriptors", "descriptors unreadable")
}

// notADirectory is a file where a directory of /proc is expected: what
// a seam points at to make it unreadable.
func notADirectory(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// refusedUnjudged checks that Reachable refuses, as ErrUnjudged naming a
// pid and why (says), the workspace command's port to its own scope and
// to a caller without commands, and the host server's to a scope without
// commands.
func refusedUnjudged(t *testing.T, p *Previews, root, b string, port, host int, says, what string) {
	t.Helper()
	for _, tc := range []struct {
		within string
		exec   bool
		port   int
	}{{b, true, port}, {root, false, port}, {b, false, host}} {
		err := p.Reachable(tc.within, tc.exec, tc.port)
		if !errors.Is(err, ErrUnjudged) || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), "pid ") {
			t.Errorf("within %q, exec %v, port %d, %s: %v; want %v naming the pid", tc.within, tc.exec, tc.port, what, err, ErrUnjudged)
		}
	}
}

// TestReachableFailsClosedOnNamespaces: a workspace process whose network
// namespace cannot be told (under a daemon that is not root, a process
// that made itself non-dumpable: /proc/PID/ns/net is EACCES) may be in the
// daemon's, so a port some socket there listens on and no readable
// workspace process holds is refused (ErrUnjudged, naming the pid), not
// taken for none of the workspace's; a port nothing listens on is no
// one's, and is not refused.
func TestReachableFailsClosedOnNamespaces(t *testing.T) {
	p, root, _, b, port := scopedServer(t)
	host := previewtest.HostServer(t, "the host's")
	notADir := notADirectory(t, "ns")
	old := nsPath
	nsPath = func(string) string { return notADir + "/net" }
	t.Cleanup(func() { nsPath = old })
	refusedUnjudged(t, p, root, b, port, host, "its network namespace", "namespaces unreadable")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := p.Reachable(b, false, free); err != nil {
		t.Errorf("a port nothing listens on: %v", err)
	}
}

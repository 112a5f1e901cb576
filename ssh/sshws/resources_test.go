package sshws

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/sshtest"
	"github.com/agentbe/agentbe-daemon/ssh/sftpd"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
)

// within runs f and fails the test if it has not returned after 10 s;
// unblock is then called, so that whatever f waits on lets it go and the
// test ends rather than hangs, and what it returns once f has returned.
func within(t *testing.T, what string, unblock func() func(), f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		release := unblock()
		<-done
		release()
		t.Fatalf("%s did not return within 10 s", what)
	}
}

// TestSFTPOpenSpecialFiles: OPEN (and OPENDIR) of a FIFO or a device in the
// workspace is answered at once with FAILURE saying what it is, instead of
// waiting for the FIFO's other end on an OS thread that nothing could
// release.
func TestSFTPOpenSpecialFiles(t *testing.T) {
	e := newEnv(t)
	c := e.sftp(t)
	fifo := filepath.Join(e.root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	names := []string{"fifo"}
	if os.Geteuid() == 0 {
		if err := unix.Mknod(filepath.Join(e.root, "zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
			t.Fatal(err)
		}
		names = append(names, "zero")
	} else {
		t.Log("not root: the device-file case is left out (mknod needs CAP_MKNOD; CI runs as root)")
	}
	// Opening the FIFO read-write releases an open waiting on it.
	unblock := func() func() {
		f, err := os.OpenFile(fifo, os.O_RDWR, 0)
		if err != nil {
			return func() {}
		}
		return func() { f.Close() }
	}
	for _, name := range names {
		for _, tc := range []struct {
			what string
			open func() error
		}{
			{"OPEN read", func() error { f, err := c.Open(name); closeIf(f); return err }},
			{"OPEN write", func() error { f, err := c.OpenFile(name, os.O_WRONLY); closeIf(f); return err }},
			{"OPEN create", func() error { f, err := c.Create(name); closeIf(f); return err }},
			{"OPENDIR", func() error { _, err := c.ReadDir(name); return err }},
		} {
			t.Run(name+"/"+tc.what, func(t *testing.T) {
				var err error
				within(t, tc.what, unblock, func() { err = tc.open() })
				if fxCode(err) != fxFailure {
					t.Fatalf("%s %s: %v (status %d), want FAILURE", tc.what, name, err, fxCode(err))
				}
				if tc.what != "OPENDIR" && !strings.Contains(err.Error(), "not a regular file or directory: /"+name) {
					t.Errorf("the message does not say what is wrong: %v", err)
				}
			})
		}
	}
	// The session still serves.
	writeHost(t, e.root, "f.txt", "ok")
	if _, err := c.Stat("f.txt"); err != nil {
		t.Fatal(err)
	}
}

func closeIf(f *sftp.File) {
	if f != nil {
		f.Close()
	}
}

// TestChannelCap: one connection opens at most sshd.DefaultMaxChannels session
// channels; the next is rejected with ResourceShortage naming the limit, and
// a slot frees when a channel closes. Other connections are not affected.
func TestChannelCap(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, "")
	var sessions []*gossh.Session
	for i := 0; i < sshd.DefaultMaxChannels; i++ {
		s, err := c.NewSession()
		if err != nil {
			t.Fatalf("channel %d: %v", i+1, err)
		}
		sessions = append(sessions, s)
	}
	_, err := c.NewSession()
	var oce *gossh.OpenChannelError
	if !errors.As(err, &oce) || oce.Reason != gossh.ResourceShortage ||
		!strings.Contains(oce.Message, fmt.Sprintf("too many channels on this connection (limit %d)", sshd.DefaultMaxChannels)) {
		t.Fatalf("channel %d: %v, want ResourceShortage naming the limit", sshd.DefaultMaxChannels+1, err)
	}
	// Another connection has its own channels.
	if s, err := e.dial(t, "").NewSession(); err != nil {
		t.Fatalf("a second connection: %v", err)
	} else {
		s.Close()
	}
	// Closing one frees its slot (once the server has seen the close).
	sessions[0].Close()
	for i := 0; ; i++ {
		s, err := c.NewSession()
		if err == nil {
			s.Close()
			break
		}
		if i == 500 {
			t.Fatalf("the slot never freed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, s := range sessions[1:] {
		s.Close()
	}
}

// TestSFTPHandleCapPerConnection: the handle limit is the connection's,
// across all its SFTP sessions, not each session's.
func TestSFTPHandleCapPerConnection(t *testing.T) {
	e := newEnv(t)
	writeHost(t, e.root, "f.txt", "x")
	conn := e.dial(t, "")
	var clients [2]*sftp.Client
	for i := range clients {
		c, err := sftp.NewClient(conn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	var files []*sftp.File
	for i := 0; i < sftpd.DefaultMaxHandles; i++ {
		f, err := clients[i%2].Open("f.txt")
		if err != nil {
			t.Fatalf("OPEN %d: %v", i+1, err)
		}
		files = append(files, f)
	}
	want := fmt.Sprintf("too many open handles (limit %d per connection)", sftpd.DefaultMaxHandles)
	for i, c := range clients {
		_, err := c.Open("f.txt")
		if fxCode(err) != fxFailure || !strings.Contains(err.Error(), want) {
			t.Errorf("session %d, OPEN past the limit: %v, want FAILURE %q", i+1, err, want)
		}
		_, err = c.ReadDir("/")
		if fxCode(err) != fxFailure || !strings.Contains(err.Error(), want) {
			t.Errorf("session %d, OPENDIR past the limit: %v, want FAILURE %q", i+1, err, want)
		}
	}
	// Another connection has its own handles.
	other := e.sftp(t)
	if f, err := other.Open("f.txt"); err != nil {
		t.Errorf("a second connection: %v", err)
	} else {
		f.Close()
	}
	// A CLOSE, or the end of a session, gives handles back.
	if err := files[0].Close(); err != nil {
		t.Fatal(err)
	}
	f, err := clients[1].Open("f.txt")
	if err != nil {
		t.Fatalf("OPEN after a CLOSE: %v", err)
	}
	f.Close()
	clients[0].Close() // held half of them
	for i := 0; ; i++ {
		f, err := clients[1].Open("f.txt")
		if err == nil {
			f.Close()
			break
		}
		if i == 500 {
			t.Fatalf("the handles of a closed session were not given back: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// hangWS is a workspace on a "hung file system": OpenFile of /hang blocks
// until released, as a call into a dead NFS server or FUSE daemon does.
type hangWS struct {
	fsops.Workspace
	release chan struct{}
	mu      sync.Mutex
	in, max int // OpenFile calls of /hang in progress, and the most at once
	entered chan struct{}
	calls   sync.WaitGroup
	once    sync.Once
}

func newHangWS(ws fsops.Workspace) *hangWS {
	return &hangWS{Workspace: ws, release: make(chan struct{}), entered: make(chan struct{}, 100)}
}

func (h *hangWS) OpenFile(p string, flag int, perm fs.FileMode) (fsops.File, error) {
	if p != "/hang" {
		return h.Workspace.OpenFile(p, flag, perm)
	}
	h.calls.Add(1)
	defer h.calls.Done()
	h.mu.Lock()
	h.in++
	h.max = max(h.max, h.in)
	h.mu.Unlock()
	h.entered <- struct{}{}
	<-h.release
	h.mu.Lock()
	h.in--
	h.mu.Unlock()
	return nil, errcode.New(errcode.ReadFailed, "open", p, "the file system did not answer")
}

func (h *hangWS) mostAtOnce() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.max
}

func (h *hangWS) unblock() { h.once.Do(func() { close(h.release) }) }

func newHangEnv(t *testing.T, sftpLimits ...sshd.SFTPLimits) (*env, *hangWS) {
	t.Helper()
	base := newEnv(t)
	h := newHangWS(base.ws)
	c := sshd.Config{Workspace: h, HostKey: sshtest.HostKey(t)}
	if len(sftpLimits) > 0 {
		c.SFTP = sftpLimits[0]
	}
	e := startEnv(t, base.root, h, Options{}, c)
	// Registered after startEnv's cleanup, so it runs first: whatever is
	// still stuck is released, and its goroutine ends before goleak looks.
	t.Cleanup(func() { h.unblock(); h.calls.Wait() })
	return e, h
}

// TestSFTPFileOpsBounded: SFTP requests in the file system at once are
// bounded per connection and on the whole server, whatever the number of
// sessions; the others wait for a slot (and are served once one frees).
func TestSFTPFileOpsBounded(t *testing.T) {
	for _, tc := range []struct {
		name                       string
		conns, sessions            int // connections, SFTP sessions on each
		connOps, serverOps, wantIn int
	}{
		{"per connection", 1, sftpd.DefaultConnOps + 4, sftpd.DefaultConnOps, sftpd.DefaultServerOps, sftpd.DefaultConnOps},
		{"per server", 3, 3, 3, 5, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, h := newHangEnv(t, sshd.SFTPLimits{ConnOps: tc.connOps, ServerOps: make(chan struct{}, tc.serverOps)})
			var clients []*sftp.Client
			for i := 0; i < tc.conns; i++ {
				conn := e.dial(t, "")
				for j := 0; j < tc.sessions; j++ {
					c, err := sftp.NewClient(conn)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { c.Close() })
					clients = append(clients, c)
				}
			}
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := c.Open("hang")
					if fxCode(err) != fxFailure {
						t.Errorf("OPEN /hang: %v, want the workspace's FAILURE", err)
					}
				}()
			}
			// As many as the limits let in get into the file system...
			for i := 0; i < tc.wantIn; i++ {
				<-h.entered
			}
			// ...and every request is answered once released.
			h.unblock()
			within(t, "the waiting requests", func() func() { return func() {} }, wg.Wait)
			if got := h.mostAtOnce(); got != tc.wantIn {
				t.Errorf("%d requests in the file system at once, want at most %d", got, tc.wantIn)
			}
		})
	}
}

// TestSFTPStuckRequestDoesNotBlockShutdown: a request stuck in the file
// system (it never returns until released) does not keep its session,
// connection or the server's Close waiting; a request waiting for a slot
// gives up when its connection goes.
func TestSFTPStuckRequestDoesNotBlockShutdown(t *testing.T) {
	e, h := newHangEnv(t, sshd.SFTPLimits{ConnOps: 1})
	conn := e.dial(t, "")
	stuck, err := sftp.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := sftp.NewClient(conn)
	if err != nil {
		t.Fatal(err)
	}
	go stuck.Open("hang") //nolint:errcheck // fails when the connection goes
	<-h.entered
	waited := make(chan error, 1)
	go func() { _, err := waiting.Stat("/"); waited <- err }()

	conn.Close()
	if err := <-waited; err == nil {
		t.Error("the request waiting for a slot was answered after its connection closed")
	}
	within(t, "Server.Close with a request stuck in the file system", func() func() {
		h.unblock()
		return func() {}
	}, func() {
		if err := e.srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	h.unblock()
	h.calls.Wait()
}

package sshd

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

const window = 2 << 20 // x/crypto's channel window

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDataBeforeRequestRefused: a session channel that receives
// MaxDataBeforeRequest bytes of data before any exec, shell or subsystem
// request (with none at all, or only env and pty-req) is closed, with the
// reason on its stderr; the client cannot push more than the window and
// what the daemon read, and the channel's places are given back.
func TestDataBeforeRequestRefused(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, "")
	for _, before := range []string{"nothing", "env and pty-req"} {
		ch, reqs, err := c.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		go gossh.DiscardRequests(reqs)
		if before != "nothing" {
			if _, err := ch.SendRequest("env", true, gossh.Marshal(struct{ Name, Value string }{"LANG", "C"})); err != nil {
				t.Fatal(err)
			}
			if ok, err := ch.SendRequest("pty-req", true, gossh.Marshal(struct {
				Term                 string
				Cols, Rows, PxW, PxH uint32
				Modes                string
			}{"xterm", 80, 24, 0, 0, ""})); err != nil || !ok {
				t.Fatalf("pty-req: %v %v", ok, err)
			}
		}
		stderr := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(ch.Stderr())
			stderr <- string(b)
		}()
		var sent atomic.Int64
		wrote := make(chan error, 1)
		go func() {
			chunk := make([]byte, 32<<10)
			for range 2 * window / len(chunk) {
				if _, err := ch.Write(chunk); err != nil {
					wrote <- err
					return
				}
				sent.Add(int64(len(chunk)))
			}
			wrote <- nil
		}()
		select {
		case err := <-wrote:
			if err == nil {
				t.Fatalf("after %s: the client wrote twice the window on a session nothing reads", before)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("after %s: the session was not closed (%d bytes sent)", before, sent.Load())
		}
		var msg string
		select {
		case msg = <-stderr:
		case <-time.After(10 * time.Second):
			t.Fatalf("after %s: stderr never ended", before)
		}
		want := fmt.Sprintf("agentbe: this session received %d bytes of data before an exec, shell or subsystem request", MaxDataBeforeRequest)
		if !strings.HasPrefix(msg, want) {
			t.Errorf("after %s: stderr %q, want it to start with %q", before, msg, want)
		}
		if got := sent.Load(); got > window+MaxDataBeforeRequest+512 {
			t.Errorf("after %s: the client pushed %d bytes; the window and what the daemon read allow %d", before, got, window+MaxDataBeforeRequest+512)
		}
		if ok, err := ch.SendRequest("exec", true, gossh.Marshal(struct{ Command string }{"echo late"})); ok && err == nil {
			t.Errorf("after %s: an exec after the refusal was accepted", before)
		}
		ch.Close()
		waitUntil(t, "the refused channel's places to be given back", func() bool { return e.srv.cfg.Channels.Open() == 0 })
	}
	// The connection carries on.
	if out, code := run(t, c, "echo still-here"); out != "still-here\n" || code != 0 {
		t.Errorf("exec after the refusals: %q %d", out, code)
	}
}

// countingExecutor's commands read their whole stdin and print how many
// bytes came and their SHA-256.
type countingExecutor struct{ sandbox.Executor }

func (countingExecutor) Start(_ context.Context, req sandbox.Request, stdio sandbox.Stdio) (sandbox.Process, error) {
	p := &countingProcess{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		h := sha256.New()
		n, _ := io.Copy(h, stdio.Stdin)
		fmt.Fprintf(stdio.Stdout, "%d %x", n, h.Sum(nil))
	}()
	return p, nil
}

type countingProcess struct{ done chan struct{} }

func (p *countingProcess) Wait() (sandbox.ExitStatus, error) {
	<-p.done
	return sandbox.ExitStatus{}, nil
}
func (*countingProcess) Signal(string) error         { return nil }
func (*countingProcess) Resize(uint16, uint16) error { return nil }
func (*countingProcess) CloseStdin() error           { return nil }

// TestDataRightAfterRequest: data the client sends right behind its exec
// request, without waiting for the answer, is the command's, every byte in
// order, even when the pre-reader has read MaxDataBeforeRequest of it
// before the request loop got to the request (the hook holds the loop on
// the env request before it until the pre-reader stopped).
func TestDataRightAfterRequest(t *testing.T) {
	e := newEnv(t, withOpts(func(o *testOptions) { o.Executor = countingExecutor{} }), withMode(""))
	var held atomic.Int32
	e.srv.beforeRequest = func(ss *session, req *gossh.Request) {
		if req.Type != "env" {
			return
		}
		select {
		case <-ss.pre.done:
			held.Add(1)
		case <-time.After(5 * time.Second):
		}
	}
	c := e.dial(t, "")
	data := make([]byte, 3*window/2)
	rand.Read(data)
	sum := sha256.Sum256(data)
	for i := range 5 {
		ch, reqs, err := c.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		go gossh.DiscardRequests(reqs)
		must := func(_ bool, err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(ch.SendRequest("env", false, gossh.Marshal(struct{ Name, Value string }{"LANG", "C"})))
		must(ch.SendRequest("exec", false, gossh.Marshal(struct{ Command string }{"count"})))
		go func() {
			ch.Write(data)
			ch.CloseWrite()
		}()
		out, err := io.ReadAll(ch)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%d %x", len(data), sum); string(out) != want {
			t.Fatalf("round %d: the command read %q; want %q", i, out, want)
		}
		ch.Close()
	}
	if held.Load() == 0 {
		t.Error("the pre-reader never stopped at its limit before the request loop served the exec: the test tested nothing")
	}
	waitUntil(t, "every channel's place to be given back", func() bool { return e.srv.cfg.Channels.Open() == 0 })
}

// dialFrom logs in to addr from the local address from.
func dialFrom(t *testing.T, addr, from string) *gossh.Client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	cc, chans, reqs, err := gossh.NewClientConn(nc, addr, clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := gossh.NewClient(cc, chans, reqs)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestChannelPoolShared: Servers given the same ChannelPool count their
// connections' channels together: past the pool's limit, or an address's
// share of it, a channel is refused with ResourceShortage naming the
// limit, whichever Server and connection it comes through; a closed
// channel gives its place back.
func TestChannelPoolShared(t *testing.T) {
	pool := NewChannelPool(4, 3)
	a := newEnv(t, withOpts(func(o *testOptions) { o.Channels = pool }))
	b := newEnv(t, withOpts(func(o *testOptions) { o.Channels = pool }))
	refused := func(c *gossh.Client, want string) {
		t.Helper()
		_, _, err := c.OpenChannel("session", nil)
		var oce *gossh.OpenChannelError
		if !errors.As(err, &oce) || oce.Reason != gossh.ResourceShortage || !strings.Contains(oce.Message, want) {
			t.Fatalf("open: %v; want ResourceShortage %q", err, want)
		}
	}
	open := func(c *gossh.Client) gossh.Channel {
		t.Helper()
		ch, reqs, err := c.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		go gossh.DiscardRequests(reqs)
		return ch
	}
	ca1, ca2 := dialFrom(t, a.addr, "127.0.0.1"), dialFrom(t, b.addr, "127.0.0.1")
	var held []gossh.Channel
	held = append(held, open(ca1), open(ca1), open(ca2))
	// 127.0.0.1 holds its share, 3, over two servers and connections.
	refused(ca1, "too many channels from this address on this daemon (limit 3 of the daemon's 4)")
	refused(ca2, "too many channels from this address on this daemon (limit 3 of the daemon's 4)")
	cb := dialFrom(t, b.addr, "127.0.0.2")
	held = append(held, open(cb))
	refused(cb, "too many channels on this daemon (limit 4); close some first")
	if n := pool.Open(); n != 4 {
		t.Errorf("the pool counts %d channels; want 4", n)
	}
	// A closed channel's place is another's.
	held[0].Close()
	waitUntil(t, "the closed channel's place", func() bool { return pool.Open() == 3 })
	held[0] = open(cb)
	for _, ch := range held {
		ch.Close()
	}
	waitUntil(t, "every place to be given back", func() bool { return pool.Open() == 0 })
	if out, code := run(t, ca1, "echo ok"); out != "ok\n" || code != 0 {
		t.Errorf("after the channels closed: %q %d", out, code)
	}
}

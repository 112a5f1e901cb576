package sshd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// setEnv sends one env request on s and says whether the server accepted it.
func setEnv(t *testing.T, s *gossh.Session, name, value string) bool {
	t.Helper()
	return s.Setenv(name, value) == nil
}

// TestAttackEnvRequestsBounded: a client may send any number of env
// requests before its command, and the default allowlist admits every
// LC_* name, so each accepted request used to be kept: 100,000 of them
// with 200 KiB values held gigabytes. A session keeps at most
// MaxSessionEnv variables and MaxSessionEnvBytes of names and values; past
// either the request is refused (as OpenSSH's sshd ignores more than 128),
// and what was accepted still reaches the command.
func TestAttackEnvRequestsBounded(t *testing.T) {
	// The daemon's default allowlist (config: --ssh-env-allowlist).
	e := newEnv(t, withOpts(func(o *testOptions) { o.EnvAllowlist = []string{"LANG", "LC_*", "TERM", "COLORTERM"} }))
	c := e.dial(t, "")

	t.Run("count", func(t *testing.T) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		accepted := 0
		for i := range 1000 {
			if setEnv(t, s, fmt.Sprintf("LC_X%d", i), "v") {
				accepted++
			}
		}
		if accepted != MaxSessionEnv {
			t.Fatalf("%d of 1000 env requests accepted, want %d (MaxSessionEnv)", accepted, MaxSessionEnv)
		}
		// Setting a name again replaces it: still accepted at the cap.
		if !setEnv(t, s, "LC_X0", "again") {
			t.Fatal("replacing an accepted variable at the cap was refused")
		}
		out, err := s.Output(`echo "$LC_X0 $LC_X1 ${LC_X` + fmt.Sprint(MaxSessionEnv) + `:-unset}"`)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(out); got != "again v unset\n" {
			t.Fatalf("command saw %q, want %q", got, "again v unset\n")
		}
	})

	t.Run("bytes", func(t *testing.T) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		value := strings.Repeat("x", 200<<10) // one packet carries up to 256 KiB
		if setEnv(t, s, "LC_BIG", value) {
			t.Fatalf("a %d-byte variable was accepted; the limit is %d bytes", len(value), MaxSessionEnvBytes)
		}
		chunk := strings.Repeat("y", 8<<10)
		total := 0
		for i := range 64 {
			name := fmt.Sprintf("LC_Y%d", i)
			if setEnv(t, s, name, chunk) {
				total += len(name) + len(chunk)
			}
		}
		if total > MaxSessionEnvBytes || total < MaxSessionEnvBytes-(8<<10)-16 {
			t.Fatalf("%d bytes of variables accepted, want at most %d and close to it", total, MaxSessionEnvBytes)
		}
		// Replacing a value by a shorter one frees room.
		if !setEnv(t, s, "LC_Y0", "") || !setEnv(t, s, "LC_Z", strings.Repeat("z", 4<<10)) {
			t.Fatal("room freed by a shorter value was not given back")
		}
	})
}

// rawSession is a session channel driven request by request, with its
// output and exit status collected.
type rawSession struct {
	ch     gossh.Channel
	stdout chan string // everything, once the channel's data ends
	stderr chan string
	exit   chan int // the exit-status, or -1 when the channel closed without one
}

func openRaw(t *testing.T, c *gossh.Client) *rawSession {
	t.Helper()
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	r := &rawSession{ch: ch, stdout: make(chan string, 1), stderr: make(chan string, 1), exit: make(chan int, 1)}
	go func() {
		code := -1
		for req := range reqs {
			if req.Type == "exit-status" && len(req.Payload) == 4 {
				code = int(uint32(req.Payload[0])<<24 | uint32(req.Payload[1])<<16 | uint32(req.Payload[2])<<8 | uint32(req.Payload[3]))
			}
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
		r.exit <- code
	}()
	go func() { b, _ := io.ReadAll(ch); r.stdout <- string(b) }()
	go func() { b, _ := io.ReadAll(ch.Stderr()); r.stderr <- string(b) }()
	return r
}

func (r *rawSession) req(t *testing.T, typ string, payload any) bool {
	t.Helper()
	var p []byte
	switch v := payload.(type) {
	case nil:
	case []byte:
		p = v
	default:
		p = gossh.Marshal(payload)
	}
	ok, err := r.ch.SendRequest(typ, true, p)
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	return ok
}

// result waits for the command's end: its output, stderr and exit status.
func (r *rawSession) result(t *testing.T) (stdout, stderr string, code int) {
	t.Helper()
	for i, ch := range []chan string{r.stdout, r.stderr} {
		select {
		case s := <-ch:
			if i == 0 {
				stdout = s
			} else {
				stderr = s
			}
		case <-time.After(30 * time.Second): // a hang guard
			t.Fatal("the session did not end")
		}
	}
	select {
	case code = <-r.exit:
	case <-time.After(30 * time.Second):
		t.Fatal("no exit status")
	}
	return stdout, stderr, code
}

type ptyReq struct {
	Term                 string
	Cols, Rows, PxW, PxH uint32
	Modes                string
}

type winch struct{ Cols, Rows, PxW, PxH uint32 }

// TestAttackSessionRequests: the requests a client with full rights may
// send on a session channel, out of order, malformed or oversized. Each
// is refused or served within its bound, and a command never runs with
// what it should not have.
func TestAttackSessionRequests(t *testing.T) {
	e := newEnv(t, withOpts(func(o *testOptions) { o.EnvAllowlist = []string{"LANG", "LC_*", "TERM", "COLORTERM"} }))
	c := e.dial(t, "")

	t.Run("env that runs code", func(t *testing.T) {
		r := openRaw(t, c)
		for _, name := range []string{"LD_PRELOAD", "LD_LIBRARY_PATH", "BASH_ENV", "ENV", "PATH", "SHELLOPTS", "PS4", "PROMPT_COMMAND", "HOME", "lang", "LC", ""} {
			if r.req(t, "env", struct{ Name, Value string }{name, "/tmp/x"}) {
				t.Errorf("env %q accepted", name)
			}
		}
	})

	t.Run("allowlist of everything", func(t *testing.T) {
		// An operator who allowlists "*" still cannot let a client set a
		// variable that runs code: the sandbox drops it.
		e := newEnv(t, withOpts(func(o *testOptions) { o.EnvAllowlist = []string{"*"} }))
		r := openRaw(t, e.dial(t, ""))
		for _, kv := range [][2]string{{"LD_PRELOAD", "/nonexistent.so"}, {"BASH_ENV", "/nonexistent"}, {"FOO", "bar"}} {
			if !r.req(t, "env", struct{ Name, Value string }{kv[0], kv[1]}) {
				t.Fatalf("env %s refused under allowlist *", kv[0])
			}
		}
		if !r.req(t, "exec", struct{ Command string }{`echo "[$LD_PRELOAD][$BASH_ENV][$FOO]"`}) {
			t.Fatal("exec refused")
		}
		if out, stderr, code := r.result(t); out != "[][][bar]\n" || code != 0 {
			t.Fatalf("got %q %q %d, want [][][bar]", out, stderr, code)
		}
	})

	t.Run("pty of 2^32-1 with huge modes", func(t *testing.T) {
		r := openRaw(t, c)
		if !r.req(t, "pty-req", ptyReq{"xterm", 1<<32 - 1, 1<<32 - 1, 1<<32 - 1, 1<<32 - 1, strings.Repeat("\x01\x00\x00\x00\x03", 40<<10)}) {
			t.Fatal("pty-req refused")
		}
		if r.req(t, "pty-req", ptyReq{"vt100", 80, 24, 0, 0, ""}) {
			t.Fatal("a second pty-req accepted")
		}
		if !r.req(t, "exec", struct{ Command string }{"stty size"}) {
			t.Fatal("exec refused")
		}
		if out, _, code := r.result(t); strings.TrimSpace(out) != "65535 65535" || code != 0 {
			t.Fatalf("stty size: %q %d, want the size clamped to 65535 65535", out, code)
		}
	})

	t.Run("terminal type with a NUL", func(t *testing.T) {
		r := openRaw(t, c)
		if !r.req(t, "pty-req", ptyReq{"xterm\x00LD_PRELOAD=/x.so", 80, 24, 0, 0, ""}) {
			t.Fatal("pty-req refused")
		}
		r.req(t, "exec", struct{ Command string }{"echo ran"})
		if out, stderr, code := r.result(t); out != "" || code != ExitCannotExecute {
			t.Fatalf("got %q %q %d, want exit 126 and nothing run", out, stderr, code)
		}
	})

	t.Run("window-change", func(t *testing.T) {
		r := openRaw(t, c)
		if r.req(t, "window-change", winch{80, 24, 0, 0}) {
			t.Fatal("window-change without a pty accepted")
		}
		if !r.req(t, "pty-req", ptyReq{"xterm", 80, 24, 0, 0, ""}) {
			t.Fatal("pty-req refused")
		}
		if !r.req(t, "exec", struct{ Command string }{"read x; stty size"}) {
			t.Fatal("exec refused")
		}
		for i := range 5000 {
			if !r.req(t, "window-change", winch{uint32(i), 1<<32 - 1, 0, 0}) {
				t.Fatalf("window-change %d refused", i)
			}
		}
		r.req(t, "window-change", winch{100, 50, 0, 0})
		r.ch.Write([]byte("\n"))
		if out, _, code := r.result(t); !strings.Contains(out, "50 100") || code != 0 {
			t.Fatalf("after 5000 window-changes: %q %d, want the last size 50 100", out, code)
		}
	})

	t.Run("signals", func(t *testing.T) {
		r := openRaw(t, c)
		if r.req(t, "signal", struct{ Name string }{"KILL"}) {
			t.Fatal("a signal with nothing running accepted")
		}
		if !r.req(t, "exec", struct{ Command string }{"sleep 30"}) {
			t.Fatal("exec refused")
		}
		for _, name := range []string{"", "SIG", "FOO", "9", "-9", "SIGRTMIN", "KILL\x00", "RTMIN+1", strings.Repeat("K", 100<<10)} {
			if r.req(t, "signal", struct{ Name string }{name}) {
				t.Errorf("signal %.20q accepted", name)
			}
		}
		if !r.req(t, "signal", struct{ Name string }{"sigterm"}) {
			t.Fatal("signal sigterm refused")
		}
		if _, _, code := r.result(t); code != 128+15 {
			t.Fatalf("exit %d after TERM, want 143", code)
		}
	})

	t.Run("exec twice, then shell, subsystem", func(t *testing.T) {
		r := openRaw(t, c)
		if !r.req(t, "exec", struct{ Command string }{"read x; echo first"}) {
			t.Fatal("exec refused")
		}
		for _, req := range []struct {
			typ string
			p   any
		}{
			{"exec", struct{ Command string }{"echo second > second.txt"}},
			{"shell", nil},
			{"subsystem", struct{ Name string }{"sftp"}},
			{"env", struct{ Name, Value string }{"LANG", "C"}},
			{"pty-req", ptyReq{"xterm", 80, 24, 0, 0, ""}},
		} {
			if r.req(t, req.typ, req.p) {
				t.Errorf("%s accepted on a channel that runs a command", req.typ)
			}
		}
		r.ch.Write([]byte("\n"))
		if out, _, _ := r.result(t); out != "first\n" {
			t.Fatalf("got %q", out)
		}
		if _, err := os.Stat(filepath.Join(e.root, "second.txt")); err == nil {
			t.Fatal("the second exec ran")
		}
	})

	t.Run("other requests and subsystems", func(t *testing.T) {
		r := openRaw(t, c)
		for _, req := range []struct {
			typ string
			p   any
		}{
			{"subsystem", struct{ Name string }{"SFTP"}},
			{"subsystem", struct{ Name string }{"sftp\x00"}},
			{"subsystem", struct{ Name string }{"netconf"}},
			{"subsystem", struct{ Name string }{"../sftp-server"}},
			{"x11-req", struct {
				Single        bool
				Proto, Cookie string
				Screen        uint32
			}{false, "MIT-MAGIC-COOKIE-1", "00", 0}},
			{"auth-agent-req@openssh.com", nil},
			{"break", struct{ Ms uint32 }{100}},
			{"xon-xoff", struct{ B bool }{true}},
			{"exit-status", struct{ S uint32 }{0}},
			{"eow@openssh.com", nil},
			{"exec", []byte{1, 2, 3}}, // malformed payload
		} {
			if r.req(t, req.typ, req.p) {
				t.Errorf("%s %v accepted", req.typ, req.p)
			}
		}
		// The channel still takes its one command.
		if !r.req(t, "exec", struct{ Command string }{"echo ok"}) {
			t.Fatal("exec refused after the refusals")
		}
		if out, _, code := r.result(t); out != "ok\n" || code != 0 {
			t.Fatalf("got %q %d", out, code)
		}
	})

	t.Run("commands with NUL, and too long", func(t *testing.T) {
		for _, cmd := range []string{"echo a\x00; touch nul.txt", "\x00touch nul.txt", "touch nul.txt # " + strings.Repeat("x", 200<<10)} {
			r := openRaw(t, c)
			if !r.req(t, "exec", struct{ Command string }{cmd}) {
				t.Fatal("exec refused (it is accepted, with exit 126)")
			}
			if out, stderr, code := r.result(t); out != "" || code != ExitCannotExecute || !strings.HasPrefix(stderr, "agentbe: ") {
				t.Errorf("%.30q: %q %.200q %d, want exit 126 with the reason", cmd, out, stderr, code)
			}
		}
		if _, err := os.Stat(filepath.Join(e.root, "nul.txt")); err == nil {
			t.Fatal("a command with a NUL ran")
		}
	})
}

// heapMiB is the live heap after a collection, in MiB.
func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// alive says whether pid still names a process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// readPid reads the "pid\n" a command printed first on r.
func readPid(t *testing.T, r io.Reader) int {
	t.Helper()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("pid %q: %v", line, err)
	}
	return pid
}

// TestAttackUnreadOutputBounded: a client that never reads its channel
// while the command writes without end (256 MiB on stdout, with a pty
// too) makes the daemon hold the window, not the output: the channel's
// writes wait for the client's window, the command waits on its pipe, and
// closing the channel kills it.
func TestAttackUnreadOutputBounded(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, "")
	before := heapMiB()
	var pids []int
	var chans []gossh.Channel
	for _, withPty := range []bool{false, false, false, true} {
		ch, reqs, err := c.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		go gossh.DiscardRequests(reqs)
		chans = append(chans, ch)
		if withPty {
			if ok, _ := ch.SendRequest("pty-req", true, gossh.Marshal(ptyReq{"xterm", 80, 24, 0, 0, ""})); !ok {
				t.Fatal("pty-req refused")
			}
		}
		if ok, _ := ch.SendRequest("exec", true, gossh.Marshal(struct{ Command string }{"echo $$ >&2; exec head -c 268435456 /dev/zero"})); !ok {
			t.Fatal("exec refused")
		}
		if withPty { // one stream: the pid comes on stdout, then the output nobody reads
			pids = append(pids, readPid(t, ch))
		} else {
			pids = append(pids, readPid(t, ch.Stderr()))
		}
	}
	// Give the commands time to write what they can (nothing more can be
	// seen from here: the client reads nothing).
	time.Sleep(2 * time.Second)
	grew := heapMiB() - before
	t.Logf("4 channels whose client reads nothing of 256 MiB each: heap +%.1f MiB", grew)
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("command %d ended: it wrote 256 MiB that nobody read", pid)
		}
	}
	// Each holds at most the client's 2 MiB window on the client's side,
	// the server's packets in flight and the pipe: far below 256 MiB.
	if grew > 64 {
		t.Fatalf("the heap grew %.1f MiB for 4 unread channels: output is being buffered", grew)
	}
	for _, ch := range chans {
		ch.Close()
	}
	for _, pid := range pids {
		waitUntil(t, fmt.Sprintf("command %d to be killed once its channel closed", pid), func() bool { return !alive(pid) })
	}
}

// TestAttackManyRunningChannels: one connection opens as many sessions as
// it may, each running a command, then one more; the extra one is refused,
// and when the client vanishes every command is killed and the
// goroutines are given back.
func TestAttackManyRunningChannels(t *testing.T) {
	e := newEnv(t)
	base := runtime.NumGoroutine()
	c, err := e.tryDial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var pids []int
	for i := range DefaultMaxChannels {
		s, err := c.NewSession()
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		out, err := s.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start("echo $$; exec sleep 120"); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, readPid(t, out))
	}
	if _, err := c.NewSession(); err == nil || !strings.Contains(err.Error(), "too many channels on this connection") {
		t.Fatalf("session %d: %v, want refused", DefaultMaxChannels+1, err)
	}
	t.Logf("%d running sessions: %d goroutines (client ends included)", DefaultMaxChannels, runtime.NumGoroutine()-base)
	c.Close()
	for _, pid := range pids {
		waitUntil(t, fmt.Sprintf("command %d killed after the client vanished", pid), func() bool { return !alive(pid) })
	}
	waitUntil(t, "goroutines given back", func() bool { return runtime.NumGoroutine() <= base+2 })
}

// TestAttackConnectionRequests: global requests and channel types the
// daemon does not serve, remote forwarding and forwarding to the daemon's
// own unix sockets among them, and a flood of keepalives.
func TestAttackConnectionRequests(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "daemon.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Errorf("something connected to the unix socket")
			c.Close()
		}
	}()
	e := newEnv(t, withOpts(func(o *testOptions) {
		o.Forward = func(context.Context, ForwardRequest) (net.Conn, error) { return nil, errors.New("no") }
	}))
	c := e.dial(t, "")
	for _, req := range []struct {
		typ     string
		payload []byte
	}{
		{"tcpip-forward", gossh.Marshal(struct {
			Addr string
			Port uint32
		}{"127.0.0.1", 0})},
		{"tcpip-forward", gossh.Marshal(struct {
			Addr string
			Port uint32
		}{"", 1<<32 - 1})},
		{"cancel-tcpip-forward", gossh.Marshal(struct {
			Addr string
			Port uint32
		}{"127.0.0.1", 22})},
		{"streamlocal-forward@openssh.com", gossh.Marshal(struct{ Path string }{sock})},
		{"cancel-streamlocal-forward@openssh.com", gossh.Marshal(struct{ Path string }{sock})},
		{"no-more-sessions@openssh.com", nil},
		{"hostkeys-prove-00@openssh.com", nil},
		{"", nil},
	} {
		if ok, _, err := c.SendRequest(req.typ, true, req.payload); err != nil || ok {
			t.Errorf("global request %q: ok=%v err=%v, want refused", req.typ, ok, err)
		}
	}
	for i := range 20000 {
		if ok, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err != nil || !ok {
			t.Fatalf("keepalive %d: ok=%v err=%v", i, ok, err)
		}
	}
	for _, typ := range []string{"x11", "auth-agent@openssh.com", "direct-streamlocal@openssh.com", "forwarded-tcpip",
		"forwarded-streamlocal@openssh.com", "tun@openssh.com", "Session", "session\x00"} {
		payload := []byte(nil)
		if typ == "direct-streamlocal@openssh.com" {
			payload = gossh.Marshal(struct {
				Path, Reserved string
				Port           uint32
			}{sock, "", 0})
		}
		_, _, err := c.OpenChannel(typ, payload)
		var oe *gossh.OpenChannelError
		if !errors.As(err, &oe) || oe.Reason != gossh.UnknownChannelType {
			t.Errorf("channel %q: %v, want unknown channel type", typ, err)
		}
	}
	// The connection still serves.
	if out, code := run(t, c, "echo ok"); out != "ok\n" || code != 0 {
		t.Fatalf("%q %d", out, code)
	}
}

// TestAttackNoExecConnection: a connection whose token may not run
// commands (Confine's noExec: a read-only or "exec": false token) gets a
// pty but no command, shell or forward, by any request order.
func TestAttackNoExecConnection(t *testing.T) {
	e := newEnv(t, withOpts(func(o *testOptions) {
		o.Forward = func(context.Context, ForwardRequest) (net.Conn, error) {
			t.Error("Forward called for a connection that may not run commands")
			return nil, errors.New("no")
		}
	}))
	srvEnd, cli := tcpConn(t)
	go func() {
		conn, err := e.srv.Handshake(context.Background(), srvEnd)
		if err != nil {
			return
		}
		conn.Confine(e.ws, true, "", "ci")
		conn.Serve()
	}()
	cc, chans, reqs, err := gossh.NewClientConn(cli, "pipe", clientConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := gossh.NewClient(cc, chans, reqs)
	defer c.Close()
	for _, setup := range []string{"none", "pty", "env and pty"} {
		for _, kind := range []string{"exec", "shell"} {
			r := openRaw(t, c)
			if setup != "none" {
				if setup == "env and pty" {
					r.req(t, "env", struct{ Name, Value string }{"LANG", "C"})
				}
				if !r.req(t, "pty-req", ptyReq{"xterm", 80, 24, 0, 0, ""}) {
					t.Fatal("pty-req refused")
				}
			}
			var p any
			if kind == "exec" {
				p = struct{ Command string }{"touch ran.txt"}
			}
			r.req(t, kind, p)
			if _, stderr, code := r.result(t); code != ExitCannotExecute || !strings.Contains(stderr, "may not run commands") {
				t.Errorf("%s after %s: %q %d, want refused with exit 126", kind, setup, stderr, code)
			}
		}
	}
	if _, err := c.Dial("tcp", "127.0.0.1:80"); err == nil {
		t.Error("a forward opened on a connection that may not run commands")
	}
	if _, err := os.Stat(filepath.Join(e.root, "ran.txt")); err == nil {
		t.Fatal("a command ran on a connection that may not run commands")
	}
}

// TestAttackHalfClosedChannels: either side's half of a channel closing
// first leaves the other working: the client's EOF ends the command's
// stdin while its output still flows, and a command that closes its
// output early still reads all the client sends and reports its exit.
func TestAttackHalfClosedChannels(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, "")

	t.Run("client EOF first", func(t *testing.T) {
		r := openRaw(t, c)
		if !r.req(t, "exec", struct{ Command string }{"cat >/dev/null; seq 1 100000 | tail -n 1"}) {
			t.Fatal("exec refused")
		}
		if _, err := r.ch.Write([]byte("some input\n")); err != nil {
			t.Fatal(err)
		}
		if err := r.ch.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if out, _, code := r.result(t); out != "100000\n" || code != 0 {
			t.Fatalf("%q %d", out, code)
		}
	})

	t.Run("command's output closed first", func(t *testing.T) {
		r := openRaw(t, c)
		if !r.req(t, "exec", struct{ Command string }{"exec >&- 2>&-; wc -c > count.txt"}) {
			t.Fatal("exec refused")
		}
		chunk := make([]byte, 64<<10)
		for range 64 { // 4 MiB, twice the window: the command must be reading
			if _, err := r.ch.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.ch.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if out, _, code := r.result(t); out != "" || code != 0 {
			t.Fatalf("%q %d", out, code)
		}
		b, err := os.ReadFile(filepath.Join(e.root, "count.txt"))
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(64*64<<10) {
			t.Fatalf("the command read %q (%v), want %d bytes", b, err, 64*64<<10)
		}
	})
}

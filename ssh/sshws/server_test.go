package sshws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/sshtest"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
)

// closeCode dials with the given header/query and reports the close code the
// server sends before any SSH byte is exchanged (0 if it does not close).
func closeCode(t *testing.T, rawURL string, h http.Header) (int, string) {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(rawURL, h)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			return 0, "" // the server spoke SSH: it accepted us
		}
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Text
		}
		t.Fatalf("read: %v", err)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, withToken("s3cret"))
	bearer := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	tests := []struct {
		name   string
		query  string
		header http.Header
		want   int
	}{
		{"bearer header", "", bearer("Bearer s3cret"), 0},
		{"bearer lower case scheme", "", bearer("bearer s3cret"), 0},
		{"query token (0.11 clients)", "?token=s3cret", nil, 0},
		{"query token url-encoded", "?token=" + url.QueryEscape("s3cret"), nil, 0},
		{"missing token", "", nil, wsclient.CloseUnauthorized},
		{"wrong bearer", "", bearer("Bearer nope"), wsclient.CloseUnauthorized},
		{"wrong query", "?token=nope", nil, wsclient.CloseUnauthorized},
		{"empty query", "?token=", nil, wsclient.CloseUnauthorized},
		{"prefix of the token", "?token=s3cre", nil, wsclient.CloseUnauthorized},
		{"token with suffix", "", bearer("Bearer s3cretX"), wsclient.CloseUnauthorized},
		{"basic scheme", "", bearer("Basic s3cret"), wsclient.CloseUnauthorized},
		{"bare token header", "", bearer("s3cret"), wsclient.CloseUnauthorized},
		{"wrong header, right query", "?token=s3cret", bearer("Bearer nope"), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, text := closeCode(t, e.url+tt.query, tt.header)
			if code != tt.want {
				t.Fatalf("close code = %d %q, want %d", code, text, tt.want)
			}
			if tt.want == wsclient.CloseUnauthorized && text != "Unauthorized" {
				t.Errorf("close reason = %q, want Unauthorized", text)
			}
		})
	}
	t.Run("ssh over a good token", func(t *testing.T) {
		c := e.dial(t, "s3cret")
		if out, _, code, _ := run(t, c, "echo ok", ""); out != "ok\n" || code != 0 {
			t.Fatalf("got %q %d", out, code)
		}
	})
	t.Run("Dial reports 4001 through CloseReason", func(t *testing.T) {
		conn, err := wsclient.Dial(context.Background(), e.url, "wrong")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.ReadAll(conn); err != nil {
			t.Fatal(err)
		}
		if code, _ := conn.CloseReason(); code != wsclient.CloseUnauthorized {
			t.Fatalf("CloseReason = %d", code)
		}
	})
}

func TestNotAWebSocket(t *testing.T) {
	e := newEnv(t)
	resp, err := http.Get(e.hts.URL + "/ssh")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "websocket") {
		t.Fatalf("GET without upgrade: %d %q", resp.StatusCode, body)
	}
	// A browser page from another origin must not get a shell on a daemon
	// without a token.
	h := http.Header{"Origin": {"http://evil.example"}}
	_, resp, err = websocket.DefaultDialer.Dial(e.url, h)
	if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin upgrade: err=%v resp=%v", err, resp)
	}
}

func TestDialBadInput(t *testing.T) {
	e := newEnv(t)
	for _, u := range []string{"ftp://x/ssh", "://", e.hts.URL + "/nope"} {
		if c, err := wsclient.Dial(context.Background(), u, ""); err == nil {
			c.Close()
			t.Errorf("Dial(%q) succeeded", u)
		}
	}
	// http:// is taken as ws://, and an empty path as /ssh.
	c, err := wsclient.Dial(context.Background(), e.hts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sshClient(c)
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
}

func TestMaxConns(t *testing.T) {
	e := newEnv(t, withConfig(func(c *sshd.Config) { c.MaxConns = 2 }))
	c1 := e.dial(t, "")
	c2 := e.dial(t, "")
	code, text := closeCode(t, e.url, nil)
	if code != wsclient.CloseTryAgain || !strings.Contains(text, "too many connections") {
		t.Fatalf("third connection: %d %q, want 1013 too many connections", code, text)
	}
	c1.Close()
	// The slot frees once the first connection is gone.
	for i := 0; ; i++ {
		c, err := e.tryDial("")
		if err == nil {
			c.Close()
			break
		}
		if i == 200 {
			t.Fatalf("slot never freed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = c2
}

func TestSSHAuthMethods(t *testing.T) {
	e := newEnv(t)
	signer, err := sshd.LoadOrCreateHostKey(filepath.Join(t.TempDir(), "client_key"))
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string][]gossh.AuthMethod{
		"none":       nil, // x/crypto/ssh always tries "none" first
		"password":   {gossh.Password("anything")},
		"public key": {gossh.PublicKeys(signer)},
	}
	for name, auth := range methods {
		t.Run(name, func(t *testing.T) {
			conn, err := wsclient.Dial(context.Background(), e.url, "")
			if err != nil {
				t.Fatal(err)
			}
			cc, chans, reqs, err := gossh.NewClientConn(conn, "ws", &gossh.ClientConfig{
				User: "someone", Auth: auth, HostKeyCallback: gossh.InsecureIgnoreHostKey(),
			})
			if err != nil {
				conn.Close()
				t.Fatal(err)
			}
			c := gossh.NewClient(cc, chans, reqs)
			defer c.Close()
			if v := string(c.ServerVersion()); v != "SSH-2.0-agentbe" {
				t.Errorf("server version %q", v)
			}
			// Global requests are answered: the clients' keepalive.
			if _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err != nil {
				t.Fatalf("keepalive: %v", err)
			}
			ok, _, err := c.SendRequest("tcpip-forward", true, gossh.Marshal(struct {
				Addr string
				Port uint32
			}{"127.0.0.1", 0}))
			if err != nil || ok {
				t.Fatalf("tcpip-forward accepted (ok=%v err=%v)", ok, err)
			}
			// Only session channels.
			if _, _, err := c.OpenChannel("direct-tcpip", nil); err == nil {
				t.Fatal("direct-tcpip channel accepted")
			}
		})
	}
}

// sigName is the exit-signal name a client sees for a death by sig. Under
// bubblewrap the sandbox sees bwrap's own exit status, 128+n, and cannot tell
// it from `exit 128+n`, so only exit-status is sent (what OpenSSH's ssh and
// the agent-backend clients read anyway).
func sigName(mode sandbox.Mode, sig string) string {
	if mode == sandbox.ModeBwrap {
		return ""
	}
	return sig
}

// requireBwrap skips when bubblewrap cannot run here (CI installs it).
func requireBwrap(t *testing.T) {
	t.Helper()
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeBwrap, WorkspaceRoot: t.TempDir()})
	if err != nil {
		t.Skipf("bubblewrap unusable here (%v); CI installs it", err)
	}
	ex.Close()
}

func TestExec(t *testing.T) {
	for _, mode := range []sandbox.Mode{sandbox.ModeSoftware, sandbox.ModeBwrap, sandbox.ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == sandbox.ModeBwrap {
				requireBwrap(t)
			}
			testExec(t, mode)
		})
	}
}

func testExec(t *testing.T, mode sandbox.Mode) {
	e := newEnv(t, withMode(mode), withConfig(func(c *sshd.Config) { c.EnvAllowlist = []string{"FOO", "LANG", "LC_*"} }))
	c := e.dial(t, "")
	sshtest.Exec(t, c, e.root, mode)

	t.Run("env allowlist", func(t *testing.T) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Setenv("FOO", "bar baz"); err != nil {
			t.Fatalf("allowlisted FOO refused: %v", err)
		}
		if err := s.Setenv("LD_PRELOAD", "/tmp/x.so"); err == nil {
			t.Fatal("LD_PRELOAD accepted")
		}
		if err := s.Setenv("BASH_ENV", "/tmp/x"); err == nil {
			t.Fatal("BASH_ENV accepted")
		}
		if err := s.Setenv("FOOBAR", "x"); err == nil {
			t.Fatal("FOOBAR accepted (FOO is exact)")
		}
		if err := s.Setenv("LC_TIME", "C"); err != nil {
			t.Fatalf("LC_TIME refused under LC_*: %v", err)
		}
		if err := s.Setenv("", "x"); err == nil {
			t.Fatal("empty name accepted")
		}
		out, err := s.Output(`printf '%s|%s|%s' "$FOO" "$LD_PRELOAD" "$LC_TIME"`)
		if err != nil || string(out) != "bar baz||C" {
			t.Fatalf("got %q %v", out, err)
		}
	})

	t.Run("signal forwarded", func(t *testing.T) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stdout, _ := s.StdoutPipe()
		if err := s.Start("echo started; exec sleep 60"); err != nil {
			t.Fatal(err)
		}
		line := make([]byte, 8)
		if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "started\n" {
			t.Fatalf("read %q %v", line, err)
		}
		if err := s.Signal(gossh.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err = s.Wait()
		var ee *gossh.ExitError
		if !errors.As(err, &ee) || ee.ExitStatus() != 143 || ee.Signal() != sigName(mode, "TERM") {
			t.Fatalf("Wait = %v, want exit 143 signal %q", err, sigName(mode, "TERM"))
		}
	})

	t.Run("bad signal name", func(t *testing.T) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stdout, _ := s.StdoutPipe()
		if err := s.Start("echo started; exec sleep 60"); err != nil {
			t.Fatal(err)
		}
		// Signal only once the command runs: under bwrap a signal sent
		// before the sandboxed process exists has no one to go to.
		if _, err := io.ReadFull(stdout, make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		// An unknown name is refused (no reply is asked for, so the
		// session just carries on); KILL still works after it.
		_ = s.Signal("NOPE")
		_ = s.Signal(gossh.SIGKILL)
		var ee *gossh.ExitError
		if err := s.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 137 {
			t.Fatalf("Wait = %v", err)
		}
	})

	t.Run("one exec per session", func(t *testing.T) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Start("exec sleep 60"); err != nil {
			t.Fatal(err)
		}
		ok, err := s.SendRequest("exec", true, gossh.Marshal(struct{ C string }{"echo twice"}))
		if ok || err != nil {
			t.Fatalf("second exec: ok=%v err=%v", ok, err)
		}
		ok, _ = s.SendRequest("subsystem", true, gossh.Marshal(struct{ C string }{"sftp"}))
		if ok {
			t.Fatal("subsystem after exec accepted")
		}
		ok, _ = s.SendRequest("env", true, gossh.Marshal(struct{ N, V string }{"FOO", "x"}))
		if ok {
			t.Fatal("env after exec accepted")
		}
		s.Close() // closing the channel kills the command
		s.Wait()
	})

	t.Run("malformed requests", func(t *testing.T) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, typ := range []string{"env", "pty-req", "window-change", "signal", "exec", "subsystem", "x11-req", "nonsense"} {
			ok, err := s.SendRequest(typ, true, []byte{0, 0, 0, 9, 'x'})
			if ok || err != nil {
				t.Errorf("%s with a garbage payload: ok=%v err=%v", typ, ok, err)
			}
		}
		ok, _ := s.SendRequest("subsystem", true, gossh.Marshal(struct{ C string }{"nope"}))
		if ok {
			t.Error("unknown subsystem accepted")
		}
		// The session is still usable.
		out, err := s.Output("echo still here")
		if err != nil || string(out) != "still here\n" {
			t.Fatalf("after bad requests: %q %v", out, err)
		}
	})

	t.Run("output still in flight when the command exits is complete", func(t *testing.T) {
		// 2 MiB fills the client's channel window; the rest (under a pipe's
		// 64 KiB) is still on our side when the command exits. The client
		// reads nothing for a second: everything must still arrive.
		const size = 2<<20 + 60000
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, _ := s.StdoutPipe()
		if err := s.Start(fmt.Sprintf("head -c %d /dev/zero", size)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		n, err := io.Copy(io.Discard, out)
		if werr := s.Wait(); err != nil || werr != nil || n != size {
			t.Fatalf("got %d bytes of %d (%v, Wait %v)", n, size, err, werr)
		}
	})

	t.Run("large output", func(t *testing.T) {
		out, _, code, _ := run(t, c, "head -c 3000000 /dev/zero | tr '\\0' a", "")
		if code != 0 || len(out) != 3000000 || strings.Trim(out, "a") != "" {
			t.Fatalf("got %d bytes, code %d", len(out), code)
		}
	})
}

func TestExecMemoryWorkspace(t *testing.T) {
	e := newMemEnv(t)
	c := e.dial(t, "")
	_, errOut, code, _ := run(t, c, "echo hi", "")
	if code != exitCannotExecute || !strings.Contains(errOut, "no command execution") {
		t.Fatalf("exec on memory: code %d stderr %q", code, errOut)
	}
	// SFTP works.
	sc, err := newSFTP(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	f, err := sc.Create("/a/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("mem"))
	f.Close()
	g, err := sc.Open("a/b.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(g)
	g.Close()
	if string(b) != "mem" {
		t.Fatalf("read back %q", b)
	}
}

func TestPty(t *testing.T) {
	e := newEnv(t)
	c := e.dial(t, "")
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm-256color", 24, 80, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	stdin, _ := s.StdinPipe()
	stdout, _ := s.StdoutPipe()
	// Print the size, wait for a line, print it again.
	if err := s.Start(`stty size; echo "term=$TERM"; read x; stty size`); err != nil {
		t.Fatal(err)
	}
	r := &lineReader{r: stdout}
	if got := r.line(t); got != "24 80" {
		t.Fatalf("first size %q", got)
	}
	if got := r.line(t); got != "term=xterm-256color" {
		t.Fatalf("TERM line %q", got)
	}
	// With want-reply, so the resize is done before we type: channel
	// requests and channel data travel separately on the server.
	ok, err := s.SendRequest("window-change", true, gossh.Marshal(struct{ Cols, Rows, W, H uint32 }{132, 50, 0, 0}))
	if err != nil || !ok {
		t.Fatalf("window-change: %v %v", ok, err)
	}
	io.WriteString(stdin, "go\n")
	r.line(t) // the terminal echoes what we typed
	if got := r.line(t); got != "50 132" {
		t.Fatalf("size after window-change %q", got)
	}
	if err := s.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestShell needs a mode that allows an interactive shell: software mode
// refuses one (its policy cannot judge what will be typed), bwrap and none
// allow it.
func TestShell(t *testing.T) {
	t.Run("software mode refuses", func(t *testing.T) {
		e := newEnv(t)
		c := e.dial(t, "")
		s, _ := c.NewSession()
		defer s.Close()
		var errb bytes.Buffer
		s.Stderr = &errb
		s.RequestPty("xterm", 24, 80, nil)
		if err := s.Shell(); err != nil {
			t.Fatal(err)
		}
		var ee *gossh.ExitError
		if err := s.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != exitCannotExecute {
			t.Fatalf("Wait = %v (stderr %q)", err, errb.String())
		}
	})
	for _, mode := range []sandbox.Mode{sandbox.ModeNone, sandbox.ModeBwrap} {
		t.Run(string(mode)+" mode runs an interactive shell on a pty", func(t *testing.T) {
			if mode == sandbox.ModeBwrap {
				requireBwrap(t)
			}
			e := newEnv(t, withMode(mode))
			c := e.dial(t, "")
			s, _ := c.NewSession()
			defer s.Close()
			if err := s.RequestPty("xterm", 24, 80, nil); err != nil {
				t.Fatal(err)
			}
			stdin, _ := s.StdinPipe()
			stdout, _ := s.StdoutPipe()
			if err := s.Shell(); err != nil {
				t.Fatal(err)
			}
			io.WriteString(stdin, "stty size; echo MARK$((6*7)) $PWD; exit 5\n")
			var buf bytes.Buffer
			io.Copy(&buf, stdout)
			var ee *gossh.ExitError
			if err := s.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 5 {
				t.Fatalf("Wait = %v (output %q)", err, buf.String())
			}
			if !strings.Contains(buf.String(), "MARK42 "+e.root) || !strings.Contains(buf.String(), "24 80") {
				t.Fatalf("shell output %q", buf.String())
			}
		})
	}
}

type lineReader struct {
	r   io.Reader
	buf []byte
}

// line returns the next line without its \r\n.
func (l *lineReader) line(t *testing.T) string {
	t.Helper()
	for {
		if i := bytes.IndexByte(l.buf, '\n'); i >= 0 {
			s := strings.TrimRight(string(l.buf[:i]), "\r")
			l.buf = l.buf[i+1:]
			return s
		}
		b := make([]byte, 512)
		n, err := l.r.Read(b)
		l.buf = append(l.buf, b[:n]...)
		if err != nil {
			t.Fatalf("reading a line: %v (have %q)", err, l.buf)
		}
	}
}

func TestConcurrentConnections(t *testing.T) {
	e := newEnv(t)
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := e.tryDial("")
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			s, err := c.NewSession()
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			out, err := s.Output(fmt.Sprintf("echo %d", i))
			if err != nil || string(out) != fmt.Sprintf("%d\n", i) {
				errs <- fmt.Errorf("conn %d: %q %v", i, out, err)
				return
			}
			sc, err := newSFTP(c)
			if err != nil {
				errs <- err
				return
			}
			defer sc.Close()
			name := fmt.Sprintf("/f%d.txt", i)
			f, err := sc.Create(name)
			if err == nil {
				_, err = f.Write([]byte(name))
				f.Close()
			}
			if err != nil {
				errs <- err
				return
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	entries, _ := os.ReadDir(e.root)
	if len(entries) != n {
		t.Fatalf("%d files written, want %d", len(entries), n)
	}
}

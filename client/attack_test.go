package client

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// This file: the client played against a hostile daemon, or whatever
// answers in its place (docs/security.md, "Attack review: the REST face,
// the client and the bridge").

// fakeRemote is a Remote on a daemon at srv's address, as NewRemote makes
// it, without connecting its SSH side.
func fakeRemote(t *testing.T, srv *httptest.Server) (*Remote, *remoteConn) {
	t.Helper()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	p, _ := strconv.Atoi(port)
	conn := &remoteConn{opts: RemoteOptions{Host: host, Port: p, Root: "/srv/ws", Token: "tok", DialTimeout: 5 * time.Second}, stop: make(chan struct{})}
	drv := &remoteDriver{conn: conn, dir: "/srv/ws"}
	return &Remote{base: newBase(drv, StatusConnected, nil, LogOptions{}), drv: drv}, conn
}

// TestAttackRedirects: a daemon (or a proxy, or an impersonator) that
// redirects /health and /mcp, to another address or to itself, gets no
// request followed: the token, X-Root-Dir and the MCP request's body go to
// the daemon's address only. Before the fix the client's /mcp transport
// set the token on every hop (another host included), and /health's
// redirect to another port of the same host carried it too.
func TestAttackRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	var leaked atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		if a := r.Header.Get("Authorization"); a != "" {
			leaked.Store(a)
		}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) // another host name, the same loopback
	for _, tc := range []struct{ name, to string }{
		{"another host", otherURL},
		{"another port", other.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			elsewhere.Store(0)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tc.to+r.URL.Path, http.StatusTemporaryRedirect)
			}))
			defer srv.Close()
			b, conn := fakeRemote(t, srv)
			if err := conn.checkRoot(context.Background()); err != nil {
				t.Fatalf("checkRoot: %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if s, err := b.MCPClient(ctx, MCPOptions{}); err == nil {
				s.Close()
				t.Fatal("MCP connected through a redirect")
			}
			if n := elsewhere.Load(); n != 0 {
				t.Errorf("%d requests followed the redirect (Authorization %v)", n, leaked.Load())
			}
		})
	}
	t.Run("loop", func(t *testing.T) {
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
		}))
		defer srv.Close()
		_, conn := fakeRemote(t, srv)
		if err := conn.checkRoot(context.Background()); err != nil {
			t.Fatalf("checkRoot: %v", err)
		}
		if n := hits.Load(); n != 1 {
			t.Errorf("a redirect loop cost %d requests, want 1", n)
		}
	})
}

// TestAttackCookies: a daemon that sets cookies gets none back: the
// client's HTTP client has no cookie jar.
func TestAttackCookies(t *testing.T) {
	var cookies atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Cookie") != "" {
			cookies.Add(1)
		}
		http.SetCookie(w, &http.Cookie{Name: "s", Value: "planted", Path: "/"})
		if r.URL.Path == "/health" {
			w.Write([]byte(`{"rootDir":"/srv/ws"}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	b, conn := fakeRemote(t, srv)
	for range 2 {
		if err := conn.checkRoot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if s, err := b.MCPClient(context.Background(), MCPOptions{}); err == nil {
			s.Close()
			t.Fatal("MCP connected to a 404")
		}
	}
	if n := cookies.Load(); n != 0 {
		t.Errorf("%d requests carried a cookie the daemon set", n)
	}
}

// TestAttackHugeMCPAnswer: a JSON answer on /mcp that goes on (here up to
// 128 MiB, standing for one that never ends) is read up to the client's
// bound (16 MiB, mcp.DefaultMaxEventSize) and fails; before the fix the
// SDK read it whole into memory. An answer that is not JSON, or answers
// another id, fails the connect or is dropped; none is taken for the
// answer.
func TestAttackHugeMCPAnswer(t *testing.T) {
	const sent = 128 << 20
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		n, _ := io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"pad":"`)
		written.Add(int64(n))
		chunk := []byte(strings.Repeat("a", 64<<10))
		for written.Load() < sent {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
		io.WriteString(w, `"}}`)
	}))
	defer srv.Close()
	b, _ := fakeRemote(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := b.MCPClient(ctx, MCPOptions{})
	if err == nil {
		s.Close()
		t.Fatal("MCP connected on a 128 MiB answer")
	}
	srv.CloseClientConnections()
	if n := written.Load(); n >= 64<<20 {
		t.Errorf("the client read %d MiB of one answer (bound 16 MiB)", n>>20)
	}
	if !strings.Contains(err.Error(), "longer than") {
		t.Errorf("the error does not name the bound: %v", err)
	}

	for _, body := range []string{`not json`, `{"jsonrpc":"2.0","id":999,"result":{}}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}))
		b, _ := fakeRemote(t, srv)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		s, err := b.MCPClient(ctx, MCPOptions{})
		cancel()
		if err == nil {
			s.Close()
			t.Errorf("answer %s: MCP connected", body)
		}
		srv.Close()
	}
}

// hostileSSH is an SSH server that plays a hostile daemon against the
// client's conventional transport: on login it opens channels towards the
// client (X11, agent, forwarded and direct TCP, a session) and sends global
// requests (port forwarding); on each exec it asks the client to exec a
// command of its own; its SFTP lists the names of listing.
type hostileSSH struct {
	ln      net.Listener
	key     gossh.Signer
	listing []string

	mu       sync.Mutex
	accepted []string // channels or requests the client took
	refused  int
	done     sync.WaitGroup
}

func startHostileSSH(t *testing.T, listing []string) *hostileSSH {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key, _ := gossh.NewSignerFromKey(priv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostileSSH{ln: ln, key: key, listing: listing}
	h.done.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.done.Go(func() { h.serve(c) })
		}
	})
	t.Cleanup(func() { ln.Close(); h.done.Wait() })
	return h
}

func (h *hostileSSH) took(what string, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ok {
		h.accepted = append(h.accepted, what)
	} else {
		h.refused++
	}
}

func (h *hostileSSH) serve(c net.Conn) {
	defer c.Close()
	conf := &gossh.ServerConfig{PasswordCallback: func(gossh.ConnMetadata, []byte) (*gossh.Permissions, error) { return nil, nil }}
	conf.AddHostKey(h.key)
	sc, chans, reqs, err := gossh.NewServerConn(c, conf)
	if err != nil {
		return
	}
	defer sc.Close()
	go gossh.DiscardRequests(reqs)
	for _, typ := range []string{"x11", "auth-agent@openssh.com", "forwarded-tcpip", "direct-tcpip", "session"} {
		ch, creqs, err := sc.OpenChannel(typ, nil)
		h.took("channel "+typ, err == nil)
		if err == nil {
			go gossh.DiscardRequests(creqs)
			ch.Close()
		}
	}
	for _, typ := range []string{"tcpip-forward", "cancel-tcpip-forward", "exec"} {
		ok, _, _ := sc.SendRequest(typ, true, nil)
		h.took("global "+typ, ok)
	}
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(gossh.UnknownChannelType, "no")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go h.session(ch, creqs)
	}
}

func (h *hostileSSH) session(ch gossh.Channel, reqs <-chan *gossh.Request) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "subsystem":
			req.Reply(true, nil)
			srv := sftp.NewRequestServer(ch, sftp.Handlers{FileGet: h, FilePut: h, FileCmd: h, FileList: h})
			srv.Serve()
			return
		case "exec":
			req.Reply(true, nil)
			for _, typ := range []string{"exec", "shell", "x11-req", "auth-agent-req@openssh.com", "env", "pty-req", "subsystem"} {
				ok, _ := ch.SendRequest(typ, true, gossh.Marshal(struct{ S string }{"touch /tmp/pwned"}))
				h.took("session "+typ, ok)
			}
			io.WriteString(ch, "ok")
			ch.SendRequest("exit-status", false, gossh.Marshal(struct{ C uint32 }{0}))
			return
		default:
			req.Reply(false, nil)
		}
	}
}

// The SFTP handlers: every file request fails; List answers listing.
func (h *hostileSSH) Fileread(*sftp.Request) (io.ReaderAt, error)  { return nil, os.ErrPermission }
func (h *hostileSSH) Filewrite(*sftp.Request) (io.WriterAt, error) { return nil, os.ErrPermission }
func (h *hostileSSH) Filecmd(*sftp.Request) error                  { return os.ErrPermission }
func (h *hostileSSH) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	if r.Method == "Stat" {
		return listerAt{namedInfo("ws")}, nil
	}
	var l listerAt
	for _, n := range h.listing {
		l = append(l, namedInfo(n))
	}
	return l, nil
}

type listerAt []os.FileInfo

func (l listerAt) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(out, l[off:])
	if off+int64(n) == int64(len(l)) {
		return n, io.EOF
	}
	return n, nil
}

type namedInfo string

func (n namedInfo) Name() string       { return string(n) }
func (n namedInfo) Size() int64        { return 0 }
func (n namedInfo) Mode() os.FileMode  { return 0o644 }
func (n namedInfo) ModTime() time.Time { return time.Time{} }
func (n namedInfo) IsDir() bool        { return false }
func (n namedInfo) Sys() any           { return nil }

// TestAttackSSHServerRequests: a daemon on the conventional transport
// (whose host key the caller pinned) cannot reach into the client's
// machine: the channels it opens towards the client (X11, the agent, TCP
// forwarded or direct, a session) are rejected, its global requests
// (tcpip-forward, an "exec") are answered false, and an exec, shell,
// X11 or agent request it sends on the client's own session is answered
// false and runs nothing. x/crypto/ssh's client does this (NewClient takes
// no channel type unless HandleChannelOpen asked for it, and a Session
// answers a request other than exit-status and exit-signal false); the
// client asks for none.
func TestAttackSSHServerRequests(t *testing.T) {
	h := startHostileSSH(t, []string{"a.txt"})
	r, err := NewRemote(context.Background(), RemoteOptions{
		Host: "127.0.0.1", Port: 1, Root: "/srv/ws", Transport: "ssh", AllowDangerous: true,
		Reconnect: ReconnectOptions{Disabled: true},
		SSH:       SSHOptions{Port: h.ln.Addr().(*net.TCPAddr).Port, Password: "x", HostKeyCallback: gossh.FixedHostKey(h.key.PublicKey())},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Destroy()
	out, err := r.Exec(context.Background(), "true", ExecOptions{})
	if err != nil || string(out) != "ok" {
		t.Fatalf("exec: %q %v", out, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.accepted) > 0 || h.refused != 15 {
		t.Errorf("the client took %v (refused %d of 15)", h.accepted, h.refused)
	}
}

// TestAttackHostileListing: an SFTP listing whose names are not one file
// name each cannot lead a caller that joins Readdir's names to a local
// directory out of it. pkg/sftp keeps the last element of a name with a
// slash ("x/../../../etc/passwd" is "passwd") and drops "." and ".."; a
// name whose last element is ".." or "." ("../..", "b/."), a name with a
// NUL, or an empty one (which pkg/sftp made "."), fails Readdir with
// READ_FAILED naming the entry; before the fix they were returned as names
// ("..", ".", "a\x00b"). A newline is a file name's own byte and is returned as it is.
func TestAttackHostileListing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		listing []string
		want    []string // nil: refused
	}{
		{"plain", []string{"a.txt", "b"}, []string{"a.txt", "b"}},
		{"newline", []string{"a\nb"}, []string{"a\nb"}},
		{"dots", []string{".", "..", "a"}, []string{"a"}},
		{"slash", []string{"a.txt", "x/../../../etc/passwd"}, []string{"a.txt", "passwd"}},
		{"dot-dot with a slash", []string{"../../outside"}, []string{"outside"}},
		{"ending in dot-dot", []string{"a", "../.."}, nil},
		{"ending in dot", []string{"a", "b/."}, nil},
		{"absolute", []string{"/etc/passwd"}, []string{"passwd"}},
		{"NUL", []string{"a\x00b"}, nil},
		{"empty", []string{""}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := startHostileSSH(t, tc.listing)
			r, err := NewRemote(context.Background(), RemoteOptions{
				Host: "127.0.0.1", Port: 1, Root: "/srv/ws", Transport: "ssh",
				Reconnect: ReconnectOptions{Disabled: true},
				SSH:       SSHOptions{Port: h.ln.Addr().(*net.TCPAddr).Port, Password: "x", HostKeyCallback: gossh.FixedHostKey(h.key.PublicKey())},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Destroy()
			names, err := r.Readdir(context.Background(), "d")
			if tc.want != nil {
				if err != nil || !slices.Equal(names, tc.want) {
					t.Fatalf("readdir: %q %v, want %q", names, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("the client returned the names %q", names)
			}
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != errcode.ReadFailed || !strings.Contains(e.Msg, "not a file name") {
				t.Errorf("err %v", err)
			}
		})
	}
}

package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/ssh/sftpd"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
)

// TestSSHListenersShareOneConfig: the SSH port and /ssh serve one SSH
// configuration and differ only in how a client logs in (a key on the
// port, the token on /ssh) and in keepalive. Through each listener: the same
// host key, the channels one connection may open, the SFTP handles one
// connection may hold, the environment a client may set
// (--ssh-env-allowlist), and --ssh-login-grace-time cutting a client that
// never logs in.
func TestSSHListenersShareOneConfig(t *testing.T) {
	dir := t.TempDir()
	_, line, signer := clientKey(t, dir, "key")
	authz := filepath.Join(dir, "authorized_keys")
	must(t, os.WriteFile(authz, []byte(line+"\n"), 0o600))
	c := testConfig(t)
	c.AuthToken = previewToken
	c.SSHListen = freeAddr(t)
	c.SSHAuthorizedKeys = authz
	c.SSHEnvAllowlist = []string{"SHARED_*"}
	// Well below the 30 s default, well above a handshake on a loaded
	// machine.
	c.SSHLoginGraceTime = 2 * time.Second
	must(t, c.Validate())
	r := start(t, c, nil)
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	must(t, os.WriteFile(filepath.Join(c.Root, "f.txt"), []byte("x"), 0o644))

	hostKeys := map[string]gossh.PublicKey{}
	seen := func(name string) gossh.HostKeyCallback {
		return func(_ string, _ net.Addr, key gossh.PublicKey) error {
			hostKeys[name] = key
			return nil
		}
	}
	listeners := map[string]func() *gossh.Client{
		"/ssh": func() *gossh.Client {
			conn, err := wsclient.Dial(context.Background(), "ws"+strings.TrimPrefix(r.url, "http")+"/ssh", previewToken)
			must(t, err)
			cc, chans, reqs, err := gossh.NewClientConn(conn, "ws", &gossh.ClientConfig{User: "agent",
				Auth: []gossh.AuthMethod{gossh.Password(previewToken)}, HostKeyCallback: seen("/ssh")})
			must(t, err)
			cl := gossh.NewClient(cc, chans, reqs)
			t.Cleanup(func() { cl.Close() })
			return cl
		},
		"the SSH port": func() *gossh.Client {
			cl, err := gossh.Dial("tcp", r.d.SSHAddr(), &gossh.ClientConfig{User: "agent",
				Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)}, HostKeyCallback: seen("the SSH port"), Timeout: 30 * time.Second})
			must(t, err)
			t.Cleanup(func() { cl.Close() })
			return cl
		},
	}
	for name, dial := range listeners {
		t.Run(name, func(t *testing.T) {
			t.Run("channels per connection", func(t *testing.T) {
				cl := dial()
				var held []gossh.Channel
				defer func() {
					for _, ch := range held {
						ch.Close()
					}
				}()
				for range sshd.DefaultMaxChannels {
					ch, reqs, err := cl.OpenChannel("session", nil)
					if err != nil {
						t.Fatalf("channel %d: %v", len(held)+1, err)
					}
					go gossh.DiscardRequests(reqs)
					held = append(held, ch)
				}
				_, _, err := cl.OpenChannel("session", nil)
				var oce *gossh.OpenChannelError
				want := fmt.Sprintf("too many channels on this connection (limit %d)", sshd.DefaultMaxChannels)
				if !errors.As(err, &oce) || oce.Reason != gossh.ResourceShortage || !strings.Contains(oce.Message, want) {
					t.Errorf("channel %d: %v; want RESOURCE_SHORTAGE %q", sshd.DefaultMaxChannels+1, err, want)
				}
			})
			t.Run("SFTP handles per connection", func(t *testing.T) {
				sc, err := sftp.NewClient(dial())
				must(t, err)
				defer sc.Close()
				var files []*sftp.File
				defer func() {
					for _, f := range files {
						f.Close()
					}
				}()
				for range sftpd.DefaultMaxHandles {
					f, err := sc.Open("f.txt")
					if err != nil {
						t.Fatalf("OPEN %d: %v", len(files)+1, err)
					}
					files = append(files, f)
				}
				want := fmt.Sprintf("too many open handles (limit %d per connection)", sftpd.DefaultMaxHandles)
				if _, err := sc.Open("f.txt"); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("OPEN past the limit: %v; want %q", err, want)
				}
			})
			t.Run("env allowlist", func(t *testing.T) {
				cl := dial()
				s, err := cl.NewSession()
				must(t, err)
				defer s.Close()
				if err := s.Setenv("SHARED_NAME", "yes"); err != nil {
					t.Errorf("a listed variable refused: %v", err)
				}
				if err := s.Setenv("LANG", "C"); err == nil {
					t.Error("LANG, which --ssh-env-allowlist no longer lists, was accepted")
				}
				if out, err := s.Output("echo $SHARED_NAME"); err != nil || string(out) != "yes\n" {
					t.Errorf("the listed variable in the command: %q %v", out, err)
				}
			})
		})
	}
	if len(hostKeys) != 2 || !bytes.Equal(hostKeys["/ssh"].Marshal(), hostKeys["the SSH port"].Marshal()) {
		t.Errorf("the listeners presented different host keys: %v", hostKeys)
	}

	// --ssh-login-grace-time: a client that never logs in is cut on both.
	t.Run("login grace", func(t *testing.T) {
		ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(r.url, "http")+"/ssh?token="+previewToken, nil)
		must(t, err)
		defer ws.Close()
		ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		for {
			_, _, err := ws.ReadMessage() // the banner, never answered
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				if ce.Code != wsclient.ClosePolicy || ce.Text != "SSH login timeout" {
					t.Errorf("/ssh: close %d %q, want 1008 SSH login timeout", ce.Code, ce.Text)
				}
				break
			}
			if err != nil {
				t.Fatalf("/ssh: a client that never logged in was not cut at --ssh-login-grace-time: %v", err)
			}
		}
		raw, err := net.Dial("tcp", r.d.SSHAddr())
		must(t, err)
		defer raw.Close()
		raw.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.Copy(io.Discard, raw); err != nil {
			t.Errorf("the SSH port: a client that never logged in was not cut at --ssh-login-grace-time: %v", err)
		}
	})
}

package daemon

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// TestAttackSSHChannelsAcrossListeners: --ssh-max-channels counts the open
// channels of the whole daemon, /ssh and the SSH port together, and
// --ssh-max-channels-per-ip one address's share of them. Past either, a
// channel is refused with RESOURCE_SHORTAGE naming the limit, on whichever
// listener and connection it comes; a channel that closes gives its place
// back.
func TestAttackSSHChannelsAcrossListeners(t *testing.T) {
	dir := t.TempDir()
	_, line, signer := clientKey(t, dir, "key")
	authz := filepath.Join(dir, "authorized_keys")
	must(t, os.WriteFile(authz, []byte(line+"\n"), 0o600))
	c := testConfig(t)
	c.AuthToken = previewToken
	c.SSHListen = freeAddr(t)
	c.SSHAuthorizedKeys = authz
	c.SSHMaxChannels, c.SSHMaxChannelsPerIP = 8, 6
	must(t, c.Validate())
	r := start(t, c, nil)
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	port := func(from string) *gossh.Client {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		nc, err := d.Dial("tcp", r.d.SSHAddr())
		if err != nil {
			t.Fatal(err)
		}
		cc, chans, reqs, err := gossh.NewClientConn(nc, r.d.SSHAddr(), &gossh.ClientConfig{User: "agent",
			Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)}, HostKeyCallback: gossh.InsecureIgnoreHostKey()})
		if err != nil {
			t.Fatal(err)
		}
		cl := gossh.NewClient(cc, chans, reqs)
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	open := func(cl *gossh.Client) gossh.Channel {
		t.Helper()
		ch, reqs, err := cl.OpenChannel("session", nil)
		if err != nil {
			t.Fatal(err)
		}
		go gossh.DiscardRequests(reqs)
		return ch
	}
	refused := func(cl *gossh.Client, on, want string) {
		t.Helper()
		_, _, err := cl.OpenChannel("session", nil)
		var oce *gossh.OpenChannelError
		if !errors.As(err, &oce) || oce.Reason != gossh.ResourceShortage || !strings.Contains(oce.Message, want) {
			t.Errorf("a channel on %s: %v; want RESOURCE_SHORTAGE %q", on, err, want)
		}
	}
	ws, local, other := sshAs(t, r.url, previewToken), port("127.0.0.1"), port("127.0.0.2")

	// 127.0.0.1 takes its share through both listeners.
	var held []gossh.Channel
	for range 3 {
		held = append(held, open(ws), open(local))
	}
	const share = "too many channels from this address on this daemon (limit 6 of the daemon's 8); close some first"
	refused(ws, "/ssh", share)
	refused(local, "the SSH port", share)
	// Another address gets the rest, then the daemon is full for everyone.
	held = append(held, open(other), open(other))
	const full = "too many channels on this daemon (limit 8); close some first"
	refused(other, "the SSH port from another address", full)
	refused(ws, "/ssh", full)
	refused(local, "the SSH port", full)
	if n := r.d.w.sshConf.Channels.Open(); n != 8 {
		t.Errorf("the daemon counts %d channels; want 8", n)
	}
	// A channel closed on /ssh is a place on the SSH port.
	held[0].Close()
	waitFor(t, "the closed channel's place", func() bool { return r.d.w.sshConf.Channels.Open() == 7 })
	held[0] = open(other)
	for _, ch := range held {
		ch.Close()
	}
	waitFor(t, "every channel's place", func() bool { return r.d.w.sshConf.Channels.Open() == 0 })
	// Both listeners serve again.
	for name, cl := range map[string]*gossh.Client{"/ssh": ws, "the SSH port": local} {
		s, err := cl.NewSession()
		if err != nil {
			t.Fatalf("%s after the channels closed: %v", name, err)
		}
		if out, err := s.Output("echo ok"); err != nil || string(out) != "ok\n" {
			t.Errorf("%s after the channels closed: %q %v", name, out, err)
		}
		s.Close()
	}
}

package client

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
)

// PublishedClientKex is the key exchange the published Node client
// (agent-backend's RemoteFilesystemBackend, on ssh2) negotiates with either
// daemon: curve25519-sha256. x/crypto/ssh would prefer
// mlkem768x25519-sha256, which our daemon supports and the reference does
// not; offering it would make our handshake do more work than it does for
// the real client.
var PublishedClientKex = []string{"curve25519-sha256", "curve25519-sha256@libssh.org", "ecdh-sha2-nistp256"}

// SSHConfig is what the published clients do: user "agent", auth "none"
// (x/crypto/ssh tries it first), host key not verified, the published
// client's key exchange.
func SSHConfig() *gossh.ClientConfig {
	c := &gossh.ClientConfig{
		User:            "agent",
		HostKeyCallback: gossh.InsecureIgnoreHostKey(),
		Timeout:         10 * time.Second,
	}
	c.KeyExchanges = PublishedClientKex
	return c
}

// DialSSH opens the daemon's /ssh WebSocket (base is http://host:port) and
// completes an SSH handshake over it with SSHConfig.
func DialSSH(ctx context.Context, base string) (*gossh.Client, error) {
	return DialSSHConfig(ctx, base, SSHConfig())
}

// DialSSHConfig is DialSSH with another client configuration.
func DialSSHConfig(ctx context.Context, base string, cfg *gossh.ClientConfig) (*gossh.Client, error) {
	ws, err := wsclient.Dial(ctx, base+"/ssh", "")
	if err != nil {
		return nil, err
	}
	return overConn(ws, base, cfg)
}

func overConn(c net.Conn, addr string, cfg *gossh.ClientConfig) (*gossh.Client, error) {
	sc, chans, reqs, err := gossh.NewClientConn(c, addr, cfg)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ssh handshake: %w", err)
	}
	return gossh.NewClient(sc, chans, reqs), nil
}

// Exec runs cmd on a new session and waits for it.
func Exec(c *gossh.Client, cmd string) error {
	s, err := c.NewSession()
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Run(cmd)
}

// SFTP opens the sftp subsystem with pipelined writes and reads, as the
// published client's fastPut/fastGet do.
func SFTP(c *gossh.Client) (*sftp.Client, error) {
	return sftp.NewClient(c, sftp.UseConcurrentWrites(true), sftp.UseConcurrentReads(true))
}

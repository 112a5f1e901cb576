package client

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/sshws"
)

// SSHConfig is what the published clients do: user "agent", auth "none"
// (x/crypto/ssh tries it first), host key not verified.
func SSHConfig() *gossh.ClientConfig {
	return &gossh.ClientConfig{
		User:            "agent",
		HostKeyCallback: gossh.InsecureIgnoreHostKey(),
		Timeout:         10 * time.Second,
	}
}

// DialSSH opens the daemon's /ssh WebSocket (base is http://host:port) and
// completes an SSH handshake over it.
func DialSSH(ctx context.Context, base string) (*gossh.Client, error) {
	ws, err := sshws.Dial(ctx, base+"/ssh", "")
	if err != nil {
		return nil, err
	}
	return overConn(ws, base)
}

func overConn(c net.Conn, addr string) (*gossh.Client, error) {
	sc, chans, reqs, err := gossh.NewClientConn(c, addr, SSHConfig())
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

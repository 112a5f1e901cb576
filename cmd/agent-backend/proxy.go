package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentbe/agentbe-daemon/internal/cafile"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
)

// newProxyCommand is `agent-backend proxy URL`: stdin/stdout ⇄ a daemon's
// /ssh WebSocket, so any OpenSSH client can reach a workspace through
// ProxyCommand. The logic is wsclient.Proxy; this only reads flags.
func newProxyCommand() *cobra.Command {
	var token, tokenFile, ca string
	cmd := &cobra.Command{
		Use:   "proxy URL",
		Short: "Bridge stdin/stdout to a daemon's SSH-over-WebSocket endpoint (for ssh -o ProxyCommand)",
		Long: `proxy connects to a daemon's /ssh WebSocket and copies the SSH byte stream
between it and stdin/stdout, so OpenSSH's ssh, sftp, scp, rsync and IDE remote
extensions can use a workspace:

  ssh -o ProxyCommand='agent-backend proxy ws://127.0.0.1:3001/ssh --token-file ~/.agentbe-token' agent@workspace
  sftp -o ProxyCommand='agent-backend proxy wss://host/ssh --token-file F' agent@workspace
  ssh -o ProxyCommand='agent-backend proxy wss://host/ssh --token-file F --ca ca.pem' agent@workspace

The user and host names are not used (any SSH authentication is accepted; the
token is the gate). The token is read from --token-file, --token, or the
AGENTBE_AUTH_TOKEN environment variable, in that order; prefer the file, which
keeps it out of ps. A wss:// daemon (--tls-cert) is verified against the
system's roots, or with --ca FILE against only the certificates in FILE: the
CA that signed the daemon's certificate, or a self-signed certificate itself.
On macOS or Windows, where agent-backend does not build,
agentbe-bridge ssh URL does the same (docs/remote-clients.md).`,
		Args:          cobra.ExactArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := proxyToken(token, tokenFile)
			if err != nil {
				return err
			}
			tlsConfig, err := cafile.Config(ca)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			d := wsclient.Dialer{TLSClientConfig: tlsConfig}
			return cafile.Explain(d.Proxy(ctx, args[0], tok, os.Stdin, os.Stdout), ca)
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "auth token (visible in ps; prefer --token-file)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the auth token")
	cmd.Flags().StringVar(&ca, "ca", "", "PEM file of the CA that signed the daemon's certificate (for a wss URL with --tls-cert)")
	return cmd
}

// proxyToken is the token to send: --token-file's content (read when the
// proxy starts: ssh starts one proxy per connection, so a connection after
// a rotation of the daemon's token reads the new one), else --token, else
// AGENTBE_AUTH_TOKEN. An empty file is an error naming it, not a
// connection without a token that the daemon closes with 4001.
func proxyToken(token, file string) (string, error) {
	if file != "" {
		// Not a FIFO (it would hold ssh), nor more than a token.
		b, err := opfile.ReadRegular(file, opfile.MaxTokenFile)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("--token-file %s: the file is empty", file)
		}
		return t, nil
	}
	if token != "" {
		return token, nil
	}
	return os.Getenv("AGENTBE_AUTH_TOKEN"), nil
}

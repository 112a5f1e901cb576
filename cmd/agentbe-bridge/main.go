// Command agentbe-bridge connects an agent on macOS, Windows or Linux to
// an agentbe daemon running elsewhere (a Linux VM, a container, a server),
// for clients that only speak stdio:
//
//	agentbe-bridge mcp URL [--token-file F] [--ca F]   MCP over stdio <-> the daemon's /mcp
//	agentbe-bridge ssh URL [--token-file F] [--ca F]   stdin/stdout <-> the daemon's /ssh (ssh -o ProxyCommand)
//
// Unlike agent-backend (the daemon, Linux only), it builds for every OS Go
// supports: it imports only the portable client packages (client/mcpbridge,
// ssh/wsclient) and internal/cafile (--ca, shared with agent-backend's
// health and proxy). docs/remote-clients.md has each client's configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentbe/agentbe-daemon/client/mcpbridge"
	"github.com/agentbe/agentbe-daemon/internal/cafile"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
)

// main leaves SIGINT and SIGTERM to their default (the process ends):
// `mcp` is blocked reading stdin, which no context can interrupt, and a
// client that stops a server it spawned closes its stdin or kills it.
// `ssh` catches them to close the WebSocket cleanly (newSSH).
func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the command line: args without the program name. It returns the
// exit code: 0, 1 on a failure, 2 on a usage error.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stderr) // help and usage never mix with the protocol on stdout
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "agentbe-bridge:", err)
		var u usageError
		if errors.As(err, &u) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError is a bad command line (exit 2).
type usageError struct{ error }

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "agentbe-bridge",
		Short: "Reach an agentbe daemon from an MCP client or OpenSSH tool that speaks only stdio",
		Long: `agentbe-bridge runs beside an agent (macOS, Windows or Linux) and carries its stdio
to an agentbe daemon elsewhere (a Linux VM or container, a server), with the daemon's token:

  agentbe-bridge mcp https://vm.example.com:3001/mcp --token-file ~/.agentbe-token
  ssh -o ProxyCommand='agentbe-bridge ssh wss://vm.example.com:3001/ssh --token-file ~/.agentbe-token' agent@workspace

The token is read from --token-file, else from the AGENTBE_AUTH_TOKEN environment variable.
Configuration for Claude Code, Claude Desktop, Cursor and VS Code: docs/remote-clients.md.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newMCP(stdin, stdout, stderr), newSSH(stdin, stdout))
	return root
}

func newMCP(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var tokenFile, caFile string
	cmd := &cobra.Command{
		Use:   "mcp URL",
		Short: "MCP over stdio <-> a daemon's streamable HTTP endpoint (http(s)://host:port/mcp)",
		Long: `mcp reads MCP messages (JSON-RPC, one per line) from stdin, POSTs each to the daemon's
/mcp with the token, and writes the answers to stdout, one per line: the stdio server an MCP client
spawns, standing for a daemon it reaches over HTTP(S) or an SSH tunnel (ssh -L 3001:127.0.0.1:3001 vm,
then http://127.0.0.1:3001/mcp). An HTTP failure answers the request with a JSON-RPC error naming
the status (401: the token is missing or wrong). With --token-file, a request the daemon refuses
(401: its token was rotated) makes the bridge read the file again and, when it holds another token,
send that request once more with it: the bridge keeps working across a rotation without a restart.`,
		Args: exactURL("http", "https"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := token(tokenFile)
			if err != nil {
				return err
			}
			client, err := httpClient(caFile)
			if err != nil {
				return err
			}
			// With a file, the bridge reads it again when the daemon
			// refuses the token (a rotation: docs/configuration.md).
			return mcpbridge.Run(cmd.Context(), mcpbridge.Options{URL: args[0], Token: tok, TokenFile: tokenFile, Client: client, Errors: stderr}, stdin, stdout)
		},
	}
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the daemon's token (else AGENTBE_AUTH_TOKEN)")
	cmd.Flags().StringVar(&caFile, "ca", "", "PEM file of the CA that signed the daemon's certificate, for an https URL (default: the system's roots)")
	return cmd
}

func newSSH(stdin io.Reader, stdout io.Writer) *cobra.Command {
	var tokenFile, caFile string
	cmd := &cobra.Command{
		Use:   "ssh URL",
		Short: "stdin/stdout <-> a daemon's SSH-over-WebSocket endpoint (ws(s)://host:port/ssh), for ssh -o ProxyCommand",
		Long: `ssh copies the SSH byte stream between stdin/stdout and the daemon's /ssh WebSocket, as
agent-backend proxy does on Linux, so OpenSSH's ssh, sftp and scp and IDE remote extensions reach
the workspace from any OS:

  ssh -o ProxyCommand='agentbe-bridge ssh ws://127.0.0.1:3001/ssh --token-file ~/.agentbe-token' agent@workspace`,
		Args: exactURL("ws", "wss"),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := token(tokenFile)
			if err != nil {
				return err
			}
			tlsConfig, err := cafile.Config(caFile)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			d := wsclient.Dialer{TLSClientConfig: tlsConfig}
			return cafile.Explain(d.Proxy(ctx, args[0], tok, stdin, stdout), caFile)
		},
	}
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "file holding the daemon's token (else AGENTBE_AUTH_TOKEN)")
	cmd.Flags().StringVar(&caFile, "ca", "", "PEM file of the CA that signed the daemon's certificate, for a wss URL (default: the system's roots)")
	return cmd
}

// exactURL accepts one argument, a URL with one of schemes.
func exactURL(schemes ...string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError{fmt.Errorf("want one URL (%s://host:port/...), got %d arguments", schemes[0], len(args))}
		}
		for _, s := range schemes {
			if strings.HasPrefix(args[0], s+"://") {
				return nil
			}
		}
		return usageError{fmt.Errorf("URL %q: want %s://… or %s://…", args[0], schemes[0], schemes[1])}
	}
}

// token is the token from file, else from AGENTBE_AUTH_TOKEN ("" for
// none: a daemon without a token on loopback, or an SSH tunnel to one).
func token(file string) (string, error) {
	if file == "" {
		return os.Getenv("AGENTBE_AUTH_TOKEN"), nil
	}
	// Not a FIFO (it would hold the bridge), nor more than a token.
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

// httpClient is the client of the requests: the system's roots, or only
// the CA of caFile (internal/cafile).
func httpClient(caFile string) (*http.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	cfg, err := cafile.Config(caFile)
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		tr.TLSClientConfig = cfg
	}
	return &http.Client{Transport: tr}, nil
}

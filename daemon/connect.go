package daemon

import (
	"fmt"
	"io"
	"net"
	"strconv"
)

// connectDoc is where the JSON for Claude Desktop and Cursor (and the
// other clients) is documented, named in the start-up line.
const connectDoc = "README.md#connect-your-agent (and examples/clients/README.md)"

// connectURL is the MCP endpoint a client on this machine pastes for a
// listener on addr: the listener's own address, or loopback for one on
// every address (0.0.0.0, ::).
func connectURL(scheme string, addr net.Addr) string {
	host, port := "127.0.0.1", ""
	if ta, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(ta.Port)
		if !ta.IP.IsUnspecified() {
			host = ta.IP.String()
		}
	} else if h, p, err := net.SplitHostPort(addr.String()); err == nil {
		host, port = h, p
	}
	return scheme + "://" + net.JoinHostPort(host, port) + routeMCP
}

// claudeCodeCommand is the command that adds the daemon to Claude Code over
// streamable HTTP: with tokenRef (config.Config.TokenRef: how the shell
// names the token, never its value) as the bearer token, or with no header
// when tokenRef is "" (no token).
func claudeCodeCommand(url, tokenRef string) string {
	cmd := "claude mcp add --transport http agentbe " + url
	if tokenRef != "" {
		cmd += ` --header "Authorization: Bearer ` + tokenRef + `"`
	}
	return cmd
}

// logConnect writes the start-up line that tells a user how to connect an
// agent to the listener on addr: the Claude Code command, and where the
// JSON for Claude Desktop and Cursor is. With Options.Terminal set (stderr
// is a terminal and the log is text), it also writes the same as a plain
// block there, which pastes without the log line's quoting.
func (d *Daemon) logConnect(scheme string, addr net.Addr) {
	cmd := claudeCodeCommand(connectURL(scheme, addr), d.opts.TokenRef)
	d.log.Info("connect your agent", "claude_code", cmd, "claude_desktop_cursor", connectDoc)
	if d.opts.Terminal != nil {
		writeConnectBlock(d.opts.Terminal, cmd)
	}
}

// writeConnectBlock is logConnect's block for a terminal.
func writeConnectBlock(w io.Writer, cmd string) {
	fmt.Fprintf(w, "\nConnect your agent\n  Claude Code:\n    %s\n  Claude Desktop, Cursor: the JSON in %s\n\n", cmd, connectDoc)
}

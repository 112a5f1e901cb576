package daemon

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/agentbe/agentbe-daemon/config"
)

// protocols holds the workspace, the executor and the protocol servers built
// from the config.
type protocols struct{}

func (p *protocols) build(cfg config.Config, opts Options) error { return nil }
func (p *protocols) mcpHandler() http.Handler                    { return nil }
func (p *protocols) sshHandler() http.Handler                    { return nil }
func (p *protocols) isolation() (mode, reason string)            { return "", "" }
func (p *protocols) shutdown(ctx context.Context) error          { return nil }
func (p *protocols) close() error                                { return nil }
func (p *protocols) serveStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	return errors.New("MCP over stdio is not wired yet")
}

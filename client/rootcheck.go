package client

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// ErrRootMismatch is wrapped by NewRemote's error (code
// INVALID_CONFIGURATION) when RemoteOptions.Root lies outside the daemon's
// root: the daemon would take every path for one inside its own root, so
// files would land in <root>/<your root>/… and commands fail to cd.
var ErrRootMismatch = errors.New("the client's root is not the daemon's root")

// maxHealthBody bounds what the client reads of /health.
const maxHealthBody = 1 << 20

// checkRoot asks the daemon's /health for its root (the "rootDir" the
// reference protocol puts there) before anything else is sent, and refuses a
// RemoteOptions.Root that is neither that root nor a directory in it, in one
// line that names both and what to change. It judges only what it can: a
// daemon that cannot be reached, or whose /health names no absolute root (a
// proxy that forwards /ssh alone), is left to the connection itself. The
// daemon's own answers say the same when a command or an MCP request comes
// from another root (internal/admit.RootMismatch).
func (c *remoteConn) checkRoot(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL("http")+"/health", nil)
	if err != nil {
		return nil
	}
	if tok := c.token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	req.Close = true // one request: no idle connection left behind
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return nil // /ssh's dial says why the daemon cannot be reached
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var health struct {
		RootDir string `json:"rootDir"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, maxHealthBody)).Decode(&health) != nil ||
		!path.IsAbs(health.RootDir) || strings.ContainsAny(health.RootDir, "\x00\n") {
		return nil
	}
	daemon := path.Clean(health.RootDir)
	c.daemonRoot = daemon
	mine := path.Clean(c.opts.Root)
	if mine == daemon || daemon == "/" || strings.HasPrefix(mine, daemon+"/") {
		return nil
	}
	return &errcode.Error{Code: errcode.InvalidConfiguration, Op: "connect", Err: ErrRootMismatch,
		Msg: fmt.Sprintf("RemoteOptions.Root %s is not the daemon's root %s: the client's root and the daemon's differ; "+
			"set RemoteOptions.Root to %s (or a directory in it), or start the daemon with --root %s", mine, daemon, daemon, mine)}
}

// httpClient is the client of the daemon's HTTP routes (/health, /mcp):
// RemoteOptions.RootCAs verifies its certificate with TLS, as for /ssh. It
// follows no redirect (the daemon sends none): a redirect is the answer, so
// the token, X-Root-Dir and a request's body go to the daemon's address
// only, never to where a proxy or an impersonator points (TestAttackRedirects).
// It keeps no cookies (no Jar).
func (c *remoteConn) httpClient() *http.Client {
	var t http.RoundTripper = http.DefaultTransport
	if c.opts.RootCAs != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: c.opts.RootCAs, MinVersion: tls.VersionTLS12}
		t = tr
	}
	return &http.Client{Transport: t, CheckRedirect: noRedirect}
}

// noRedirect makes a redirect the answer of its request.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

package main

import (
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestTokenFileNeitherWaitsNorSwallows: the token file of agent-backend
// proxy, health and site serve naming a FIFO fails at once instead of
// holding the command until someone writes, and one over 64 KiB fails
// instead of being read whole (and sent, or served as the token); each
// error names the file.
func TestTokenFileNeitherWaitsNorSwallows(t *testing.T) {
	t.Run("proxy", func(t *testing.T) {
		testenv.RefusesHostileFiles(t, "proxyToken", func(name string) (string, error) { return proxyToken("", name) })
	})
	t.Run("health", func(t *testing.T) {
		for _, c := range testenv.HostileFiles(t) {
			_, errOut, code := run(t, nil, "health", "--url", "http://127.0.0.1:1/health", "--token-file", c.Path)
			if code != 1 || !strings.Contains(errOut, "--token-file") || !strings.Contains(errOut, c.Path) || !strings.Contains(errOut, c.Want) {
				t.Errorf("health --token-file %s: exit %d, %q; want an error naming the flag, the file and %q", c.Path, code, errOut, c.Want)
			}
		}
	})
	t.Run("site serve", func(t *testing.T) {
		for _, c := range testenv.HostileFiles(t) {
			siteServeRefused(t, exampleSiteDir(t, ""), []string{"--token-file", c.Path}, "/", "--token-file", c.Path, c.Want)
		}
	})
	// The same holds for site serve's --config file.
	t.Run("site serve --config", func(t *testing.T) {
		for _, c := range testenv.HostileFiles(t) {
			siteServeRefused(t, exampleSiteDir(t, ""), []string{"--config", c.Path}, "/", "--config", c.Path, c.Want)
		}
	})
}

package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/tools/sites"
)

// TestReadOnlySiteOnDaemon: --site naming a directory that cannot be
// written (mounted read-only, as a ConfigMap volume is) and that lacks
// AGENTS.md and index.html starts, and serves both from memory under
// /site/, leaving the directory as it was.
func TestReadOnlySiteOnDaemon(t *testing.T) {
	c := testConfig(t)
	c.Site = filepath.Join(t.TempDir(), "site")
	if err := os.CopyFS(c.Site, os.DirFS("../examples/site")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"AGENTS.md", "index.html"} {
		if err := os.Remove(filepath.Join(c.Site, name)); err != nil {
			t.Fatal(err)
		}
	}
	testenv.ReadOnlyDir(t, c.Site)
	c.AuthToken = "site-token-42"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	if code, body := send(t, "GET", r.url+"/site/AGENTS.md", "", bearer(c.AuthToken)); code != 200 || body != sites.AgentsMD {
		t.Errorf("GET /site/AGENTS.md: %d %.100s", code, body)
	}
	if code, body := send(t, "GET", r.url+"/site/index.html", "", bearer(c.AuthToken)); code != 200 || !strings.Contains(body, "This is a tool site") {
		t.Errorf("GET /site/index.html: %d %.100s", code, body)
	}
	if code, body := send(t, "GET", r.url+"/site/", "", bearer(c.AuthToken)); code != 200 || !strings.Contains(body, "# Example tool site") {
		t.Errorf("GET /site/: %d %.100s", code, body)
	}
	for _, name := range []string{"AGENTS.md", "index.html"} {
		if _, err := os.Lstat(filepath.Join(c.Site, name)); !os.IsNotExist(err) {
			t.Errorf("%s in the read-only site: %v", name, err)
		}
	}
}

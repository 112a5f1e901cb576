package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/tools/sites"
)

// TestSiteServeReadOnlyDir: site serve of a directory that cannot be
// written (mounted read-only, as a ConfigMap volume is) and lacks
// AGENTS.md and index.html starts, serves both from memory, runs the
// pages' commands, and says so in one line of its log.
func TestSiteServeReadOnlyDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "site")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("---\ntools:\n  - [ls]\n---\n# read-only\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.ReadOnlyDir(t, dir)
	port := freePort(t)
	url, logs := startSite(t, dir, port, "site", "serve", "-p", fmt.Sprint(port), "--isolation", "software")
	if a := sitePost(t, url, "/", "", "ls"); a.status != http.StatusOK || a.res.Stdout != "README.md\n" {
		t.Errorf("ls: %d %+v", a.status, a.res)
	}
	resp, err := http.Get(url + "/AGENTS.md")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != sites.AgentsMD {
		t.Errorf("GET /AGENTS.md: %d %.100s", resp.StatusCode, body)
	}
	if n := strings.Count(logs.String(), "serving the missing agent files from memory"); n != 1 {
		t.Errorf("%d lines saying the agent files are served from memory, want 1:\n%s", n, logs)
	}
}

package sites

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestConfigMapSite: a site mounted as the kubelet mounts a ConfigMap
// (each page a symlink through ..data into a timestamped directory) serves
// its pages and their tools, and its overview lists each page once, by
// its own name, not again under ..data or the timestamped directory.
func TestConfigMapSite(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "site")
	testenv.ConfigMapVolume(t, vol, map[string]string{
		"README.md": "---\ntools:\n  - [ls]\n---\n# site\n", "guide.md": "# guide\n",
		"AGENTS.md": "rules\n", "index.html": "<p>site</p>\n",
	})
	ws, err := fsops.NewDir(vol, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	exe, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeNone, WorkspaceRoot: ws.Root()})
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	s, err := New(Options{Workspace: ws, Executor: exe})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if page, data, err := s.Read("/guide"); err != nil || page != "guide.md" || string(data) != "# guide\n" {
		t.Errorf("/guide: %s %q %v", page, data, err)
	}
	if specs, err := s.specs("README.md", nil); err != nil || len(specs) != 1 {
		t.Errorf("README.md's tools: %v %v", specs, err)
	}
	got := s.pageList(context.Background())
	slices.Sort(got)
	if want := []string{"AGENTS.md", "README.md", "guide.md"}; !slices.Equal(got, want) {
		t.Errorf("the overview's pages: %v; want %v", got, want)
	}
}

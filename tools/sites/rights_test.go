package sites

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// TestPagesOthersCanChangeRunNothing: a page's frontmatter says which
// commands run, so a page is judged as every file that grants rights
// (internal/opfile): world-writable, or (as root) owned by nobody, its
// commands are refused with 403 (a POST, and so each component) until it
// is put right; a site whose README.md others may write does not start.
func TestPagesOthersCanChangeRunNothing(t *testing.T) {
	s, dir := exampleSite(t, nil)
	readme := filepath.Join(dir, "README.md")
	ls := ActionRequest{Command: []string{"ls"}}
	if _, err := s.Run(context.Background(), "README.md", ls); err != nil {
		t.Fatalf("a 0644 page: %v", err)
	}
	if err := os.Chmod(readme, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), "README.md", ls); status(err) != http.StatusForbidden || !strings.Contains(err.Error(), "another user than the operator could change this page") {
		t.Fatalf("a world-writable page: %v, want 403", err)
	}
	if _, err := New(Options{Workspace: s.ws, Executor: s.exe, NoAgentFiles: true}); err == nil || !strings.Contains(err.Error(), "chmod go-w "+readme) {
		t.Fatalf("New with a world-writable README.md: %v", err)
	}
	if err := os.Chmod(readme, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), "README.md", ls); err != nil {
		t.Fatalf("the page put right: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a file to another user (CI runs as root)")
	}
	if err := os.Chown(readme, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(context.Background(), "README.md", ls); status(err) != http.StatusForbidden {
		t.Fatalf("a page nobody owns: %v, want 403", err)
	}
}

// TestRefusedPagesDoNotFloodTheLog: the overview judges every page on
// every GET, so any caller with the token repeats the refusal at will;
// its warning is rate-limited (internal/ratelog): one line per interval,
// however many refusals.
func TestRefusedPagesDoNotFloodTheLog(t *testing.T) {
	logs := &syncbuf.Buffer{}
	s, dir := exampleSite(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(logs, nil)) })
	if err := os.Chmod(filepath.Join(dir, "README.md"), 0o666); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if _, err := s.Run(context.Background(), "README.md", ActionRequest{Command: []string{"ls"}}); status(err) != http.StatusForbidden {
			t.Fatalf("a world-writable page: %v, want 403", err)
		}
	}
	if n := strings.Count(logs.String(), "a page another user could change runs nothing"); n != 1 {
		t.Errorf("%d log lines for 50 refusals of one page, want 1:\n%s", n, logs)
	}
}

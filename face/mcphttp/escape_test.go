package mcphttp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEscapes sends paths that leave the workspace through every
// path-taking tool: relative "..", ".." inside a path, an absolute host path
// outside the root, a symlink to a file outside and a symlink to a directory
// outside. Each must fail as a tool error (or, for the absolute path, land
// inside the root), leak nothing of the outside file, and change nothing
// outside.
func TestEscapes(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{root, outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "TOPSECRET-CONTENT"
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret+"\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret.png"), []byte(secret), 0o644)
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("inside\n"), 0o644)
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "out_link"))
	os.Symlink(filepath.Join(outside, "secret.png"), filepath.Join(root, "out_link.png"))
	os.Symlink(outside, filepath.Join(root, "out_dir"))
	e := newEnvAt(t, root)
	cs := e.connect(t, nil)

	type pathCase struct {
		name     string
		p        string
		absolute bool // resolves inside the root: may succeed, must not leak
	}
	paths := []pathCase{
		{"dotdot", "../outside/secret.txt", false},
		{"inner dotdot", "a/../../outside/secret.txt", false},
		{"absolute outside", filepath.Join(outside, "secret.txt"), true},
		{"symlink file", "out_link", false},
		{"symlink dir", "out_dir/secret.txt", false},
		{"symlink dir itself", "out_dir", false},
	}
	tools := []struct {
		tool string
		args func(p string) map[string]any
	}{
		{"read_text_file", func(p string) map[string]any { return map[string]any{"path": p} }},
		{"read_text_file", func(p string) map[string]any { return map[string]any{"path": p, "head": 1} }},
		{"read_media_file", func(p string) map[string]any { return map[string]any{"path": p, "force": true} }},
		{"read_media_file", func(p string) map[string]any { return map[string]any{"path": p + ".png"} }},
		{"read_multiple_files", func(p string) map[string]any { return map[string]any{"paths": []string{p}} }},
		{"write_file", func(p string) map[string]any { return map[string]any{"path": p, "content": "pwned"} }},
		{"edit_file", func(p string) map[string]any {
			return map[string]any{"path": p, "edits": []any{map[string]any{"oldText": "TOPSECRET", "newText": "pwned"}}}
		}},
		{"create_directory", func(p string) map[string]any { return map[string]any{"path": p + "/x"} }},
		{"list_directory", func(p string) map[string]any { return map[string]any{"path": filepath.Dir(p)} }},
		{"list_directory_with_sizes", func(p string) map[string]any { return map[string]any{"path": filepath.Dir(p)} }},
		{"directory_tree", func(p string) map[string]any { return map[string]any{"path": filepath.Dir(p)} }},
		{"move_file", func(p string) map[string]any { return map[string]any{"source": p, "destination": "moved.txt"} }},
		{"move_file", func(p string) map[string]any { return map[string]any{"source": "a.txt", "destination": p + "-moved"} }},
		{"search_files", func(p string) map[string]any { return map[string]any{"path": filepath.Dir(p), "pattern": "**"} }},
		{"get_file_info", func(p string) map[string]any { return map[string]any{"path": p} }},
		{"grep", func(p string) map[string]any {
			return map[string]any{"pattern": "TOPSECRET", "path": p, "outputMode": "content"}
		}},
		{"grep", func(p string) map[string]any { return map[string]any{"pattern": "TOPSECRET", "path": filepath.Dir(p)} }},
	}
	snapshot := func() string {
		var b strings.Builder
		filepath.Walk(outside, func(p string, fi os.FileInfo, _ error) error {
			b.WriteString(p)
			if fi != nil && fi.Mode().IsRegular() {
				c, _ := os.ReadFile(p)
				b.Write(c)
			}
			return nil
		})
		return b.String()
	}
	before := snapshot()
	for _, pc := range paths {
		for _, tc := range tools {
			args := tc.args(pc.p)
			dirArg := strings.HasPrefix(tc.tool, "list_") || tc.tool == "directory_tree" || tc.tool == "search_files" ||
				(tc.tool == "grep" && args["path"] != pc.p)
			if dirArg && filepath.Dir(pc.p) == "." {
				continue // the parent of "out_link" is the root itself: not an escape
			}
			t.Run(pc.name+"/"+tc.tool, func(t *testing.T) {
				got := call(t, cs, tc.tool, args)
				if strings.Contains(got, "TOPSECRET") && !strings.Contains(got, `"TOPSECRET`) && !strings.Contains(got, "TOPSECRET\"") {
					t.Fatalf("outside content leaked: %q", got)
				}
				// (An absolute path lands inside the root, where earlier
				// calls created a secret.txt of our own: not a leak.)
				if !pc.absolute && strings.Contains(got, "secret.txt") && !strings.Contains(got, pc.p) && !strings.Contains(got, "secret.txt -") {
					t.Fatalf("outside listing leaked: %q", got)
				}
				if pc.absolute {
					return
				}
				switch tc.tool {
				case "read_multiple_files":
					if !strings.Contains(got, ": Error - ") {
						t.Fatalf("no per-file error: %q", got)
					}
				case "list_directory", "list_directory_with_sizes", "directory_tree", "search_files":
					// Listing "out_dir" or ".."-paths must fail; the symlink
					// entry itself may show up in its parent's listing.
					if !strings.HasPrefix(got, "isError: true") {
						t.Fatalf("want isError, got %q", got)
					}
				default:
					if !strings.HasPrefix(got, "isError: true") {
						t.Fatalf("want isError, got %q", got)
					}
				}
			})
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("outside directory changed:\nbefore %q\nafter  %q", before, after)
	}
}

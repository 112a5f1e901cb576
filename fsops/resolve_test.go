package fsops

import (
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// pathTable is the path table of docs/protocol.md, root /var/workspace. want
// "" means PATH_ESCAPE_ATTEMPT.
var pathTable = []struct{ in, want string }{
	{"file.txt", "/var/workspace/file.txt"},
	{"subdir/file.txt", "/var/workspace/subdir/file.txt"},
	{".", "/var/workspace"},
	{"", "/var/workspace"},
	{"/", "/var/workspace"},
	{"/var/workspace/a/b", "/var/workspace/a/b"},
	{"/var/workspace", "/var/workspace"},
	{"/file.txt", "/var/workspace/file.txt"},
	{"/etc/passwd", "/var/workspace/etc/passwd"},
	{"a/../b", "/var/workspace/b"},
	{"../etc/passwd", ""},
	{"a/b/../../../../etc", ""},
	{"/var/workspace2/x", "/var/workspace/var/workspace2/x"},
	// Beyond the table: cleaning and odd spellings.
	{"./a//b/", "/var/workspace/a/b"},
	{"//etc//passwd", "/var/workspace/etc/passwd"},
	{"..", ""},
	{"a/..", "/var/workspace"},
	{"/..", ""},
}

func TestResolvePathTable(t *testing.T) {
	for _, tc := range pathTable {
		got, err := ResolvePath("/var/workspace", tc.in)
		if tc.want == "" {
			e := wantCode(t, err, errcode.PathEscapeAttempt)
			if e.Path != tc.in {
				t.Errorf("ResolvePath(%q): error names %q, want the caller's path", tc.in, e.Path)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ResolvePath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// An absolute path that leaves the root once cleaned is an "other absolute"
// path: it is taken relative (the reference's behaviour), not refused.
func TestResolvePathAbsoluteDotDot(t *testing.T) {
	got, err := ResolvePath("/var/workspace", "/var/workspace/../etc")
	if err != nil || got != "/var/workspace/var/etc" {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestResolvePathRejectsNUL(t *testing.T) {
	_, err := ResolvePath("/var/workspace", "a\x00b")
	wantCode(t, err, errcode.InvalidArgument)
}

func TestResolvePathSlashRoot(t *testing.T) {
	for in, want := range map[string]string{"a": "/a", "/etc": "/etc", "..": "/"} {
		got, err := ResolvePath("/", in)
		if want == "" {
			wantCode(t, err, errcode.PathEscapeAttempt)
			continue
		}
		if err != nil || got != want {
			t.Errorf("ResolvePath(/, %q) = %q, %v", in, got, err)
		}
	}
}

// The same table through both implementations' Resolve, with the workspace
// root in place of /var/workspace, with and without a scope.
func TestWorkspaceResolveTable(t *testing.T) {
	for _, im := range impls() {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			root := ws.Root()
			check := func(t *testing.T, ws Workspace, base string) {
				for _, tc := range pathTable {
					in := strings.ReplaceAll(tc.in, "/var/workspace", base)
					got, err := ws.Resolve(in)
					if tc.want == "" {
						wantCode(t, err, errcode.PathEscapeAttempt)
						continue
					}
					want := strings.ReplaceAll(tc.want, "/var/workspace", base)
					if err != nil || got != want {
						t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
					}
				}
			}
			t.Run("root", func(t *testing.T) { check(t, ws, root) })
			t.Run("scope", func(t *testing.T) {
				s, err := ws.Scope("users/u1")
				must(t, err)
				defer s.Close()
				if s.Root() != root+"/users/u1" {
					t.Fatalf("scope Root() = %q", s.Root())
				}
				check(t, s, root+"/users/u1")
				// The spec's scope rows.
				for in, want := range map[string]string{"file.txt": root + "/users/u1/file.txt", "/file.txt": root + "/users/u1/file.txt"} {
					if got, err := s.Resolve(in); err != nil || got != want {
						t.Errorf("scope Resolve(%q) = %q, %v", in, got, err)
					}
				}
				_, err = s.Resolve("../u2/secret")
				wantCode(t, err, errcode.PathEscapeAttempt)
				if rel, err := s.Rel("/file.txt"); err != nil || rel != "file.txt" {
					t.Errorf("scope Rel = %q, %v", rel, err)
				}
			})
			t.Run("nested", func(t *testing.T) {
				s1, err := ws.Scope("users")
				must(t, err)
				s2, err := s1.Scope("/u1")
				must(t, err)
				if s2.Root() != root+"/users/u1" {
					t.Fatalf("nested Root() = %q", s2.Root())
				}
				_, err = s2.Scope("../u2")
				wantCode(t, err, errcode.PathEscapeAttempt)
				_, err = ws.Scope("../x")
				wantCode(t, err, errcode.PathEscapeAttempt)
			})
		})
	}
}

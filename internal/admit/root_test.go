package admit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/httpguard"
)

// TestRootDirRule: X-Root-Dir absent, "undefined" or the daemon's root is
// admitted; any other value is 403 in one line that names both roots and
// the option to change on each side, and only after the token passed (an
// unauthenticated request learns nothing about the root).
func TestRootDirRule(t *testing.T) {
	ru := Rules{Token: httpguard.NewToken("s3cret"), RootDir: "/srv/ws"}
	for _, tc := range []struct {
		name, token, root string
		status            int
	}{
		{"none", "s3cret", "", 0},
		{"undefined", "s3cret", "undefined", 0},
		{"equal", "s3cret", "/srv/ws", 0},
		{"differs", "s3cret", "/home/you/workspace", http.StatusForbidden},
		{"inside is not the root", "s3cret", "/srv/ws/sub", http.StatusForbidden},
		{"no token, wrong root", "", "/home/you/workspace", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/mcp", nil)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.root != "" {
				r.Header.Set(HeaderRootDir, tc.root)
			}
			_, ref := ru.Admit(r)
			if tc.status == 0 {
				if ref != nil {
					t.Fatalf("refused: %+v", ref)
				}
				return
			}
			if ref == nil || ref.Status != tc.status {
				t.Fatalf("got %+v, want status %d", ref, tc.status)
			}
			if tc.status == http.StatusUnauthorized {
				if strings.Contains(ref.Message, "/srv/ws") {
					t.Errorf("an unauthenticated request learns the root: %q", ref.Message)
				}
				return
			}
			// The body: the reference's words, then what to change.
			want := "Server is configured for /srv/ws, not " + tc.root + ": the client's root directory differs from the daemon's; " +
				"set the client's rootDir to /srv/ws, or start the daemon with --root " + tc.root
			rec := httptest.NewRecorder()
			ref.Write(rec)
			var body struct{ Error, Message string }
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if rec.Code != http.StatusForbidden || body.Error != "Root directory mismatch" || body.Message != want {
				t.Errorf("got %d %q: %q\nwant %q", rec.Code, body.Error, body.Message, want)
			}
			if body.Message != RootMismatch("/srv/ws", tc.root) || strings.Contains(body.Message, "\n") {
				t.Errorf("not the one line of RootMismatch: %q", body.Message)
			}
			// A WebSocket close reason (/gateway) carries the reference's
			// words alone, which fit its 123 bytes for roots of usual length.
			if ref.Message != "Server is configured for /srv/ws, not "+tc.root {
				t.Errorf("Message = %q", ref.Message)
			}
		})
	}
}

// TestCommandDir: the command lines the client libraries send over SSH
// give their working directory; anything else (a person's cd, a computed
// directory, HOME elsewhere) gives none.
func TestCommandDir(t *testing.T) {
	for _, tc := range []struct {
		cmd, dir string
	}{
		// The TypeScript client (buildFullCommand), with and without env.
		{`HOME='/home/you/workspace' cd "/home/you/workspace" && mkdir -p "/home/you/workspace"`, "/home/you/workspace"},
		{`HOME='/w' FOO='a'\''b' BAR='x y' cd "/w" && echo hi`, "/w"},
		{`HOME='/w' unset FOO; cd "/w" && ls`, "/w"},
		{`HOME='/w/users/1' cd "/w/users/1" && ls`, "/w/users/1"},
		// The Python client.
		{`cd /w && HOME=/w K=v ls`, "/w"},
		{`cd '/w x' && HOME='/w x' ls`, "/w x"},
		// This module's client (client/remote.go).
		{`HOME='/w' cd '/w' && ls`, "/w"},
		{"cd '/w/sub' && export HOME='/w/sub' K='v' && {\nls\n}", "/w/sub"},
		{`HOME='/w/' cd "/w" && ls`, "/w"},
		// Not a client's line.
		{`cd /tmp && ls`, ""},
		{`ls /w`, ""},
		{`HOME=/x cd /w && ls`, ""},
		{`cd /w && HOME=/x ls`, ""},
		{`HOME=/w cd /w; ls`, ""},
		{`HOME=/w cd w && ls`, ""},
		{`HOME="$P" cd "$P" && ls`, ""},
		{"HOME=/w cd `pwd` && ls", ""},
		{`HOME=/w cd /w* && ls`, ""},
		{`HOME='/w cd '/w' && ls`, ""},
		{`echo HOME=/w cd /w && ls`, ""},
		{``, ""},
	} {
		dir, ok := CommandDir(tc.cmd)
		if ok != (tc.dir != "") || dir != tc.dir {
			t.Errorf("CommandDir(%q) = %q, %v; want %q", tc.cmd, dir, ok, tc.dir)
		}
	}
}

func TestWithinRoot(t *testing.T) {
	for _, tc := range []struct {
		dir   string
		roots []string
		want  bool
	}{
		{"/srv/ws", []string{"/srv/ws"}, true},
		{"/srv/ws/a/b", []string{"/srv/ws"}, true},
		{"/srv/ws/", []string{"/srv/ws"}, true},
		{"/srv/wsx", []string{"/srv/ws"}, false},
		{"/srv/ws/../x", []string{"/srv/ws"}, false},
		{"/home/you/workspace", []string{"/srv/ws", "/data/ws"}, false},
		{"/data/ws/a", []string{"/srv/ws", "/data/ws"}, true},
		{"/anything", []string{"/"}, true},
		{"/anything", []string{""}, false},
	} {
		if got := WithinRoot(tc.dir, tc.roots...); got != tc.want {
			t.Errorf("WithinRoot(%q, %q) = %v", tc.dir, tc.roots, got)
		}
	}
}

// FuzzCommandDir: any line gives either nothing or a clean absolute
// directory that the line itself names, and never panics.
func FuzzCommandDir(f *testing.F) {
	for _, s := range []string{
		`HOME='/w' cd "/w" && ls`, `cd /w && HOME=/w ls`, `HOME='/w' unset A; cd '/w' && x`,
		"cd '/w' && export HOME='/w' && {\nls\n}", `HOME="/w\"" cd "/w\"" && ls`, `HOME=\/w cd /\w && ls`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dir, ok := CommandDir(s)
		if !ok {
			if dir != "" {
				t.Fatalf("not recognized but a dir: %q", dir)
			}
			return
		}
		if !path.IsAbs(dir) || path.Clean(dir) != dir {
			t.Fatalf("CommandDir(%q) = %q: not a clean absolute path", s, dir)
		}
	})
}

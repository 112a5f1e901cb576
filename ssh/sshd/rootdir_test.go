package sshd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/admit"
)

// runBoth runs cmd on a new session of c and returns stdout, stderr and
// the exit status.
func runBoth(t *testing.T, c *gossh.Client, cmd string) (string, string, int) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	err = s.Run(cmd)
	var ee *gossh.ExitError
	if errors.As(err, &ee) {
		return out.String(), errb.String(), ee.ExitStatus()
	}
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return out.String(), errb.String(), 0
}

// TestClientRootOutsideRoot: a client library configured for another root
// sends its commands as `HOME='<its root>' cd "<its root>" && …`; the core
// refuses them before they run, with one line naming both roots and the
// option to change (admit.RootMismatch), where the policy would have said
// "mkdir writes to /home/you/workspace, a system path" and bwrap "cd: No
// such file or directory". The same client at the daemon's root (or a
// directory in it, as a scope), and a person's own cd, run as before.
func TestClientRootOutsideRoot(t *testing.T) {
	e := newEnv(t)
	if err := os.Mkdir(filepath.Join(e.root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := e.dial(t, "")

	const other = "/home/you/workspace"
	for _, cmd := range []string{
		`HOME='` + other + `' cd "` + other + `" && mkdir -p "` + other + `"`, // the TypeScript client's mkdir
		`cd ` + other + ` && HOME=` + other + ` ls`,                           // the Python client's shape
		`HOME='` + other + `' cd '` + other + `' && echo hi`,                  // this module's client
	} {
		out, stderr, code := runBoth(t, c, cmd)
		want := "agentbe: " + admit.RootMismatch(e.root, other) + "\n"
		if code != 126 || out != "" || stderr != want {
			t.Errorf("%s:\n got %d %q %q\nwant 126 %q", cmd, code, out, stderr, want)
		}
	}
	if _, err := os.Stat(filepath.Join(e.root, "home")); !os.IsNotExist(err) {
		t.Errorf("the refused mkdir made something in the workspace: %v", err)
	}

	for _, tc := range []struct{ cmd, out string }{
		{`HOME='` + e.root + `' cd "` + e.root + `" && echo at-root`, "at-root\n"},
		{`HOME='` + e.root + `/sub' cd "` + e.root + `/sub" && pwd`, e.root + "/sub\n"},
		{`echo plain`, "plain\n"},
	} {
		out, stderr, code := runBoth(t, c, tc.cmd)
		if code != 0 || out != tc.out {
			t.Errorf("%s: %d %q %q, want 0 %q", tc.cmd, code, out, stderr, tc.out)
		}
	}
	// A person's cd elsewhere is not a client's line: whatever the policy
	// says of it, it is not the root-mismatch refusal.
	if _, stderr, _ := runBoth(t, c, `cd /home/you && ls`); strings.Contains(stderr, "Server is configured for") {
		t.Errorf("a plain cd was taken for a client's root: %q", stderr)
	}
}

// TestClientRootAlias: with Config.Root the root as the operator spelled it
// (a link to the workspace), a client that uses that spelling is no root
// mismatch, and a refusal names the configured spelling.
func TestClientRootAlias(t *testing.T) {
	alias := filepath.Join(t.TempDir(), "link")
	e := newEnv(t, withOpts(func(o *testOptions) {
		if err := os.Symlink(o.Workspace.Root(), alias); err != nil {
			t.Fatal(err)
		}
		o.Root = alias
	}))
	c := e.dial(t, "")
	// Whether a cd through the link may run is the executor's to judge
	// (software mode's policy refuses it); it is not a root mismatch.
	if _, stderr, _ := runBoth(t, c, `HOME='`+alias+`' cd "`+alias+`" && echo ok`); strings.Contains(stderr, "Server is configured for") {
		t.Errorf("the configured spelling taken for another root: %q", stderr)
	}
	if _, stderr, code := runBoth(t, c, `HOME='/elsewhere' cd "/elsewhere" && echo ok`); code != 126 ||
		stderr != "agentbe: "+admit.RootMismatch(alias, "/elsewhere")+"\n" {
		t.Errorf("another root: %d %q", code, stderr)
	}
}

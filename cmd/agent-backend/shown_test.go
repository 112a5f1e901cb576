package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNamesInErrorsCannotDriveTheTerminal: a file name holding an escape
// sequence, a newline and a byte that is not UTF-8 (another user's name
// in a sticky --extensions directory) is written escaped by `ext check`
// (each error one line) and by the daemon's refusal to start
// (--check-config): nothing of it reaches the terminal raw.
func TestNamesInErrorsCannotDriveTheTerminal(t *testing.T) {
	dir := t.TempDir()
	name := "evil\x1b[2J\nok\tforged\xff.star"
	if err := os.WriteFile(filepath.Join(dir, name), []byte("def f(:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := run(t, nil, "ext", "check", dir)
	if code != 1 || !strings.Contains(errOut, `evil\x1b[2J\nok\tforged\xff.star`) || strings.Count(errOut, "\n") != 1 || strings.ContainsAny(errOut, "\x1b\t") || strings.Contains(errOut, "\xff") {
		t.Errorf("ext check: exit %d, stderr %q; want the name escaped, one line", code, errOut)
	}

	if err := os.Chmod(filepath.Join(dir, name), 0o666); err != nil { // refused by the rights rule
		t.Fatal(err)
	}
	_, errOut, code = run(t, nil, "daemon", "--root", t.TempDir(), "--isolation", "software", "--extensions", dir, "--check-config")
	if code != 1 || !strings.Contains(errOut, `evil\x1b[2J`) || strings.Contains(errOut, "\x1b") || strings.Contains(errOut, "\xff") {
		t.Errorf("--check-config: exit %d, stderr %q; want the name's escape and byte escaped", code, errOut)
	}
}

func TestShown(t *testing.T) {
	for _, tc := range []struct {
		in        string
		keepLines bool
		want      string
	}{
		{"plain /ext/x.star: ok", false, "plain /ext/x.star: ok"},
		{"a\nb\tc", false, `a\nb\tc`},
		{"a\nb\tc", true, "a\nb\tc"},
		{"\x1b[2J\r\u009b\x7f", true, `\x1b[2J\r\u009b\x7f`},
		{"bad \xff\xfe byte, é kept", true, `bad \xff\xfe byte, é kept`},
	} {
		if got := shown(tc.in, tc.keepLines); got != tc.want {
			t.Errorf("shown(%q, %v) = %q, want %q", tc.in, tc.keepLines, got, tc.want)
		}
	}
}

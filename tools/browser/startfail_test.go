package browser

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestStartThatCannotExec: a browser whose exec fails (here a program that
// lost its execute bit after the daemon found it; as root, a session
// directory that Chromium's user cannot reach fails the same way, at the
// child's chdir) ends browser.start at once with the error, leaves no
// directory and no session: the start's clean-up does not wait for a
// browser that never ran.
func TestStartThatCannotExec(t *testing.T) {
	dir := testenv.SharedTempDir(t)
	fake := dir + "/chromium"
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sessions := testenv.SharedTempDir(t)
	if err := os.Chmod(sessions, 0o711); err != nil {
		t.Fatal(err)
	}
	f := setup(t, func(o *Options) { o.BrowserPath = fake; o.TempDir = sessions })
	if err := os.Chmod(fake, 0o644); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		text  string
		isErr bool
	}
	done := make(chan answer, 1)
	go func() {
		text, isErr, _ := f.call(t, "browser.start", `{}`)
		done <- answer{text, isErr}
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(time.Minute):
		t.Fatal("browser.start of a browser that cannot be executed did not return within a minute")
	}
	if !a.isErr || !strings.Contains(a.text, "starting "+fake) || !strings.Contains(a.text, "permission denied") {
		t.Errorf("start: %s", a.text)
	}
	if entries, _ := os.ReadDir(sessions); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
	if h := f.p.Health(); len(h.Sessions) != 0 {
		t.Errorf("health: %+v", h)
	}
}

// TestStartUnderTmpdirChromiumCannotReach: as root, Chromium runs as
// another user (nobody by default); a session directory under a directory
// only root may search (a TMPDIR such as /root/tmp) fails the start at
// once, and the error names the user, the directory and the fix.
func TestStartUnderTmpdirChromiumCannotReach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Chromium runs as another user only when the daemon is root; this test is about that user's reach (CI runs as root)")
	}
	dir := testenv.SharedTempDir(t)
	fake := dir + "/chromium"
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	private := t.TempDir() + "/private"
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	f := setup(t, func(o *Options) { o.BrowserPath = fake; o.TempDir = private })
	done := make(chan string, 1)
	go func() {
		text, isErr, _ := f.call(t, "browser.start", `{}`)
		if !isErr {
			text = "not an error: " + text
		}
		done <- text
	}()
	var text string
	select {
	case text = <-done:
	case <-time.After(time.Minute):
		t.Fatal("browser.start under a directory Chromium's user cannot reach did not return within a minute")
	}
	for _, want := range []string{"starting " + fake, "permission denied", "--browser-run-as", private + "/agentbe-browser-", "TMPDIR"} {
		if !strings.Contains(text, want) {
			t.Errorf("start: %s\nwant it to contain %q", text, want)
		}
	}
	if entries, _ := os.ReadDir(private); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

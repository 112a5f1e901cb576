package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOperatorFilesAreReadSafely: --auth-token-file, --operator-token-file,
// --metrics-token-file and --config are read by internal/opfile's reader. A FIFO under the name
// (with no writer, a plain read waits for ever), /dev/zero (a plain read
// never ends and takes all memory), a directory, a file its group or
// others may write, and a file in a directory others may write are
// refused with the flag and the reason, and Load returns at once.
func TestOperatorFilesAreReadSafely(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ww := filepath.Join(dir, "ww.yaml")
	os.WriteFile(ww, []byte("port: 1234\n"), 0o600)
	os.Chmod(ww, 0o666)
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	inOpen := filepath.Join(open, "token")
	os.WriteFile(inOpen, []byte("tok\n"), 0o600)

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"auth token FIFO", []string{"--auth-token-file", fifo}, `--auth-token-file "` + fifo + `": cannot read: not a regular file (a FIFO)`},
		{"auth token /dev/zero", []string{"--auth-token-file", "/dev/zero"}, `--auth-token-file "/dev/zero": cannot read: not a regular file (a character device)`},
		{"auth token directory", []string{"--auth-token-file", dir}, "not a regular file (a directory)"},
		{"auth token world-writable", []string{"--auth-token-file", ww}, "writable by its group or by others"},
		{"auth token in an open directory", []string{"--auth-token-file", inOpen}, "which its group or others may write"},
		{"operator token FIFO", []string{"--operator-token-file", fifo}, `--operator-token-file "` + fifo + `": cannot read: not a regular file (a FIFO)`},
		{"operator token world-writable", []string{"--operator-token-file", ww}, "writable by its group or by others"},
		{"metrics token FIFO", []string{"--metrics-token-file", fifo}, `--metrics-token-file "` + fifo + `": cannot read: not a regular file (a FIFO)`},
		{"metrics token in an open directory", []string{"--metrics-token-file", inOpen}, "which its group or others may write"},
		{"config FIFO", []string{"--config", fifo}, `--config "` + fifo + `": not a regular file (a FIFO)`},
		{"config world-writable", []string{"--config", ww}, `--config "` + ww + `": is writable by its group or by others`},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := load(t, c.args, nil); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want %q", err, c.want)
				}
			case <-time.After(20 * time.Second):
				// Not a timing assertion: a reader that waits on the
				// FIFO never returns; say so instead of hanging the run.
				t.Fatal("Load is still reading the file")
			}
		})
	}
}

// TestMetricsTokenFile: --metrics-token-file is read as the other token
// files are (trimmed; an empty file refused, naming the flag), and a token
// that is the agent's or the operator's is refused, so that a scraper
// never holds one that opens the workspace or the approvals.
func TestMetricsTokenFile(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	scrape, agent, empty := file("scrape", "scrape-tok\n"), file("agent", "agent-tok\n"), file("empty", " \n")
	c, err := load(t, []string{"--root", t.TempDir(), "--metrics-token-file", scrape, "--auth-token-file", agent}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsToken != "scrape-tok" {
		t.Fatalf("MetricsToken = %q", c.MetricsToken)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, []string{"--metrics-token-file", empty}, nil); err == nil || !strings.Contains(err.Error(), `--metrics-token-file "`+empty+`" is empty`) {
		t.Fatalf("an empty file: %v", err)
	}
	for _, other := range []string{"--auth-token-file", "--operator-token-file"} {
		c, err := load(t, []string{"--root", t.TempDir(), "--metrics-token-file", agent, other, agent}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--metrics-token-file holds the agent's or the operator's token") {
			t.Fatalf("the scraper's token equal to %s's: %v", other, err)
		}
	}
}

// TestReloadTokenFiles: a reload reads the three token files again and
// gives the new tokens; a file that became empty, unsafe or equal to
// another token's changes nothing and names the flag; a token given as a
// value is kept.
func TestReloadTokenFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	agent, op, scrape := write("agent", "agent-1\n"), write("op", "op-1\n"), write("scrape", "scrape-1\n")
	c, err := load(t, []string{"--root", t.TempDir(), "--auth-token-file", agent, "--operator-token-file", op, "--metrics-token-file", scrape}, nil)
	if err != nil {
		t.Fatal(err)
	}
	write("agent", "agent-2\n")
	write("op", " op-2 \n")
	next, err := c.ReloadTokenFiles()
	if err != nil {
		t.Fatal(err)
	}
	if next.AuthToken != "agent-2" || next.OperatorToken != "op-2" || next.MetricsToken != "scrape-1" {
		t.Errorf("reloaded %q %q %q, want agent-2 op-2 scrape-1", next.AuthToken, next.OperatorToken, next.MetricsToken)
	}
	if c.AuthToken != "agent-1" {
		t.Errorf("the reload changed the config it was called on: %q", c.AuthToken)
	}
	for _, bad := range []struct{ file, content, want string }{
		{"agent", "\n", `--auth-token-file "` + agent + `" is empty`},
		{"op", "agent-2", "--operator-token-file holds the agent's token"},
		{"scrape", "op-2", "--metrics-token-file holds the agent's or the operator's token"},
	} {
		write("agent", "agent-2\n")
		write("op", "op-2\n")
		write("scrape", "scrape-1\n")
		write(bad.file, bad.content)
		got, err := next.ReloadTokenFiles()
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s holding %q: %v, want %q", bad.file, bad.content, err, bad.want)
		}
		if got.AuthToken != "agent-2" || got.OperatorToken != "op-2" || got.MetricsToken != "scrape-1" {
			t.Errorf("%s holding %q: a failed reload changed the tokens: %q %q %q", bad.file, bad.content, got.AuthToken, got.OperatorToken, got.MetricsToken)
		}
	}
	write("scrape", "scrape-1\n")
	if err := os.Chmod(op, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := next.ReloadTokenFiles(); err == nil || !strings.Contains(err.Error(), "--operator-token-file") {
		t.Errorf("a file others may write: %v", err)
	}
	byValue, err := load(t, []string{"--root", t.TempDir(), "--auth-token", "by-value"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := byValue.ReloadTokenFiles(); err != nil || got.AuthToken != "by-value" {
		t.Errorf("a token given as a value: %q, %v", got.AuthToken, err)
	}
}

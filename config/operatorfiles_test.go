package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOperatorFilesAreReadSafely: --auth-token-file, --operator-token-file
// and --config are read by internal/opfile's reader. A FIFO under the name
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

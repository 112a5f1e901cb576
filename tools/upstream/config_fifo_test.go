package upstream

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadConfigFIFO: an --upstreams file that is a FIFO fails at once,
// naming the file, instead of holding the daemon's start until someone
// writes to it. A writer comes along after a while, so that a read that
// waits fails the test rather than hanging it.
func TestLoadConfigFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "mcp.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	late := time.AfterFunc(3*time.Second, func() {
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Write([]byte(`{"servers":[]}`))
			f.Close()
		}
	})
	defer late.Stop()
	if _, err := LoadConfig(fifo, env(nil)); err == nil || !strings.Contains(err.Error(), "not a regular file (a FIFO)") || !strings.Contains(err.Error(), fifo) {
		t.Errorf("LoadConfig of a FIFO: %v; want an error naming the file and the FIFO", err)
	}
}

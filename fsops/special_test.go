package fsops

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// noWait runs f and fails the test if it has not returned within 5 s (an
// open waiting for a FIFO's other end); unblock is then called so the
// stuck call can finish and the test ends instead of hanging, and what it
// returns once the call has returned.
func noWait(t *testing.T, what string, unblock func() func(), f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		release := unblock()
		<-done
		release()
		t.Fatalf("%s blocked (still waiting after 5 s)", what)
		return nil
	}
}

// TestSpecialFilesRefused: FIFOs and devices in the workspace are refused at
// once, by every operation that opens what a client named, with
// INVALID_ARGUMENT naming the path; none of them waits for a FIFO's other
// end. OpenFile is what SFTP's OPEN uses.
func TestSpecialFilesRefused(t *testing.T) {
	root := t.TempDir()
	ws := newDirWS(t, root)
	fifo := filepath.Join(root, "fifo")
	must(t, syscall.Mkfifo(fifo, 0o666))
	must(t, os.Symlink("fifo", filepath.Join(root, "fifolink")))
	// Opening the FIFO read-write never blocks and releases every open
	// waiting on it: how a stuck call is set free when the test fails.
	unblock := func() func() {
		f, err := os.OpenFile(fifo, os.O_RDWR, 0)
		if err != nil {
			return func() {}
		}
		return func() { f.Close() }
	}
	names := []string{"fifo", "fifolink"}
	if os.Geteuid() == 0 {
		// /dev/zero's numbers: read whole, it would never end.
		must(t, unix.Mknod(filepath.Join(root, "zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))))
		names = append(names, "zero")
	} else {
		t.Log("not root: the device-file cases are left out (mknod needs CAP_MKNOD; CI runs as root)")
	}

	opens := []struct {
		name string
		flag int
	}{
		{"read", os.O_RDONLY},
		{"write", os.O_WRONLY},
		{"read-write", os.O_RDWR},
		{"create", os.O_WRONLY | os.O_CREATE},
		{"create-truncate", os.O_RDWR | os.O_CREATE | os.O_TRUNC},
		{"append", os.O_WRONLY | os.O_APPEND},
	}
	for _, name := range names {
		for _, o := range opens {
			t.Run("OpenFile/"+o.name+"/"+name, func(t *testing.T) {
				err := noWait(t, "OpenFile", unblock, func() error {
					f, err := ws.OpenFile(name, o.flag, 0o644)
					if err == nil {
						f.Close()
					}
					return err
				})
				e := wantCode(t, err, errcode.InvalidArgument)
				// The message states the fact; Error() names the path once.
				if e.Msg != "not a regular file or directory" || e.Path != name || !strings.Contains(e.Error(), `"`+name+`": not a regular file or directory`) {
					t.Errorf("message %q does not say what %s is", e.Error(), name)
				}
			})
		}
		t.Run("reads/"+name, func(t *testing.T) {
			for _, op := range []struct {
				what string
				f    func() error
			}{
				{"ReadFile", func() error { _, err := ws.ReadFile(name); return err }},
				{"ReadLines", func() error { _, err := ws.ReadLines(context.Background(), name, LineRange{}); return err }},
				{"ReadDir", func() error { _, err := ws.ReadDir(name); return err }},
				{"ReadDirTypes", func() error { _, err := ws.ReadDirTypes(name); return err }},
				{"Truncate", func() error { return ws.Truncate(name, 0) }},
			} {
				if err := noWait(t, op.what, unblock, op.f); err == nil {
					t.Errorf("%s(%s) succeeded", op.what, name)
				}
			}
			for _, op := range []struct {
				what string
				f    func() error
			}{
				{"Grep", func() error {
					_, err := ws.Grep(t.Context(), GrepOptions{Pattern: "x", Path: name})
					return err
				}},
				{"Tree", func() error { _, err := ws.Tree(t.Context(), name, TreeOptions{}); return err }},
				{"Search", func() error { _, err := ws.Search(t.Context(), name, "*", SearchOptions{}); return err }},
			} {
				// Whether these fail or find nothing, they must answer.
				noWait(t, op.what, unblock, op.f) //nolint:errcheck
			}
		})
	}
	// Regular files still open, read-write, without O_NONBLOCK left behind.
	must(t, ws.WriteFile("f.txt", []byte("abc")))
	f, err := ws.OpenFile("f.txt", os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	// Through SyscallConn: Fd would itself put the descriptor in blocking mode.
	sc, err := f.(*dirFile).f.SyscallConn()
	must(t, err)
	var fl int
	var ferr error
	must(t, sc.Control(func(fd uintptr) { fl, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }))
	must(t, ferr)
	if fl&unix.O_NONBLOCK != 0 {
		t.Error("a regular file kept O_NONBLOCK")
	}
	if _, err := f.WriteAt([]byte("x"), 3); err != nil {
		t.Fatal(err)
	}
	// Directories open too (SFTP clients OPEN them before READDIR-ing).
	d, err := ws.OpenFile(".", os.O_RDONLY, 0)
	must(t, err)
	d.Close()
}

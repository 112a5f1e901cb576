//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// enderBuffer is a Stdio writer that counts its OutputEnded calls.
type enderBuffer struct {
	syncbuf.Buffer
	ended atomic.Int32
}

func (b *enderBuffer) OutputEnded() { b.ended.Add(1) }

// guard bounds a test's reads of f, so a broken pipe fails the test
// instead of hanging it; it is not a measure.
func guard(t *testing.T, f *os.File) {
	t.Helper()
	if err := f.SetReadDeadline(time.Now().Add(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestStdoutPipe: with a StdoutPipe as Stdout (and a StdinPipe as Stdin),
// Start hands back the read end of the command's stdout: what the command
// writes is read from it as it runs; stderr is copied to Stdio.Stderr and
// its OutputEnder told once, before Wait returns; Wait does not wait for
// stdout nor close it, so what the command wrote before it exited is read
// after Wait, and then io.EOF.
func TestStdoutPipe(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			sp, op := &StdinPipe{}, &StdoutPipe{}
			if op.File() != nil {
				t.Fatal("File before Start is not nil")
			}
			var errOut enderBuffer
			p, err := e.Start(context.Background(), Request{Command: "while read l; do echo \"got $l\"; done; echo done >&2; echo last; exit 7"},
				Stdio{Stdin: sp, Stdout: op, Stderr: &errOut})
			if err != nil {
				t.Fatal(err)
			}
			f := op.File()
			if f == nil {
				t.Fatal("File after Start is nil")
			}
			defer f.Close()
			guard(t, f)
			r := bufio.NewReader(f)
			for _, line := range []string{"one", "two"} {
				if _, err := io.WriteString(sp.File(), line+"\n"); err != nil {
					t.Fatalf("write %q: %v", line, err)
				}
				got, err := r.ReadString('\n')
				if err != nil || got != "got "+line+"\n" {
					t.Fatalf("read after writing %q: %q, %v", line, got, err)
				}
			}
			if err := sp.File().Close(); err != nil {
				t.Fatal(err)
			}
			st, err := p.Wait()
			if err != nil || st.Code != 7 || errOut.String() != "done\n" || errOut.ended.Load() != 1 {
				t.Fatalf("status %+v err %v stderr %q (ended %d times)", st, err, errOut.String(), errOut.ended.Load())
			}
			rest, err := io.ReadAll(r)
			if err != nil || string(rest) != "last\n" {
				t.Fatalf("stdout after Wait: %q, %v; want \"last\\n\" then io.EOF", rest, err)
			}
		})
	}
}

// TestStdoutPipeEndsAtExit: the stream ends (io.EOF) once the command has
// exited and what it left in its group or cgroup was killed: a background
// process that still held the pipe does not keep the reader waiting for it.
func TestStdoutPipeEndsAtExit(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			op := &StdoutPipe{}
			p, err := e.Start(context.Background(), Request{Command: "(sleep 60; echo late) & echo first"}, Stdio{Stdout: op})
			if err != nil {
				t.Fatal(err)
			}
			f := op.File()
			defer f.Close()
			if st, err := p.Wait(); err != nil || st.Code != 0 {
				t.Fatalf("status %+v err %v", st, err)
			}
			guard(t, f)
			out, err := io.ReadAll(f)
			if err != nil || string(out) != "first\n" {
				t.Fatalf("stdout: %q, %v; want \"first\\n\" then io.EOF", out, err)
			}
		})
	}
}

// TestStdoutPipeClosedByCommand: a command that closes its stdout and runs
// on is seen at once: the reader gets io.EOF while it still runs. Not
// under bwrap, whose own process holds the command's stdio until the
// command exits (as it does for Stdout copied by the sandbox).
func TestStdoutPipeClosedByCommand(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			op := &StdoutPipe{}
			p, err := e.Start(context.Background(), Request{Command: "echo bye; exec >&-; exec sleep 60"}, Stdio{Stdout: op})
			if err != nil {
				t.Fatal(err)
			}
			f := op.File()
			defer f.Close()
			guard(t, f)
			out, err := io.ReadAll(f)
			if err != nil || string(out) != "bye\n" {
				t.Fatalf("stdout: %q, %v; want \"bye\\n\" then io.EOF", out, err)
			}
			// Still running: the signal reaches it, and it ends by it.
			if err := p.Signal("KILL"); err != nil {
				t.Fatalf("signal after the stream ended: %v (the command had not run on)", err)
			}
			if st, _ := p.Wait(); st.Signal != "KILL" && st.Code != 128+int(syscall.SIGKILL) {
				t.Fatalf("status %+v, want killed", st)
			}
		})
	}
}

// TestStdoutPipeReadEndedByCaller: the file is in Go's poller, so a Read
// blocked on a command that writes nothing ends at a read deadline
// (os.ErrDeadlineExceeded) and at Close (os.ErrClosed); Wait then returns
// once the command is killed, without the stream.
func TestStdoutPipeReadEndedByCaller(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	op := &StdoutPipe{}
	p, err := e.Start(context.Background(), Request{Command: "sleep 60"}, Stdio{Stdout: op})
	if err != nil {
		t.Fatal(err)
	}
	f := op.File()
	if err := f.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past its deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := f.Read(make([]byte, 1))
		read <- err
	}()
	// The read may start after Close: either way it says the file is closed.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-read; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read ended by Close: %v, want os.ErrClosed", err)
	}
	if err := p.Signal("KILL"); err != nil {
		t.Fatal(err)
	}
	if st, _ := p.Wait(); st.Signal != "KILL" {
		t.Fatalf("status %+v, want killed", st)
	}
}

// TestStdoutPipeRefusedWithPty: a pty has no pipe to hand out, and a
// StdoutPipe is never written.
func TestStdoutPipeRefusedWithPty(t *testing.T) {
	e, _ := newExec(t, ModeNone)
	_, err := e.Start(context.Background(), Request{Command: "true", Pty: &Pty{}}, Stdio{Stdout: &StdoutPipe{}})
	if !errcode.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), "StdoutPipe") {
		t.Fatalf("StdoutPipe with a pty: %v, want InvalidArgument naming StdoutPipe", err)
	}
	if n, err := (&StdoutPipe{}).Write([]byte("x")); n != 0 || err == nil {
		t.Fatalf("Write: %d, %v; want an error", n, err)
	}
}

// TestAttackStdoutPipeNotInherited: the read end a StdoutPipe hands out is
// close-on-exec, so no other command started at the same moment inherits
// it (one that did could read another command's output: an upstream
// server's answers). Commands with a StdoutPipe and commands that list
// their descriptors start together; no listing holds a StdoutPipe's pipe,
// and each StdoutPipe command's output arrives on its own pipe.
func TestAttackStdoutPipeNotInherited(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			const n = 6
			type started struct {
				p   Process
				op  *StdoutPipe
				out *syncbuf.Buffer
				id  int
			}
			var (
				mu      sync.Mutex
				pipes   []started
				lookers []started
				wg      sync.WaitGroup
				errs    = make(chan error, 2*n)
			)
			for i := 0; i < 2*n; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					s := started{out: &syncbuf.Buffer{}, id: i}
					req := Request{Command: "ls -l /proc/$$/fd; echo listed; sleep 60"}
					stdio := Stdio{Stdout: s.out}
					if i%2 == 0 {
						s.op = &StdoutPipe{}
						req.Command, stdio.Stdout = fmt.Sprintf("echo mine %d; sleep 60", i), s.op
					}
					p, err := e.Start(context.Background(), req, stdio)
					if err != nil {
						errs <- err
						return
					}
					s.p = p
					mu.Lock()
					if s.op != nil {
						pipes = append(pipes, s)
					} else {
						lookers = append(lookers, s)
					}
					mu.Unlock()
				}(i)
			}
			wg.Wait()
			close(errs)
			t.Cleanup(func() {
				for _, s := range append(pipes, lookers...) {
					_ = s.p.Signal("KILL")
					_, _ = s.p.Wait()
					if s.op != nil {
						s.op.File().Close()
					}
				}
			})
			for err := range errs {
				t.Fatal(err)
			}
			inodes := map[string]bool{}
			for _, s := range pipes {
				// Through SyscallConn: Fd would set the file blocking.
				sc, err := s.op.File().SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				var st syscall.Stat_t
				var serr error
				if err := sc.Control(func(fd uintptr) { serr = syscall.Fstat(int(fd), &st) }); err != nil || serr != nil {
					t.Fatal(err, serr)
				}
				inodes[fmt.Sprintf("pipe:[%d]", st.Ino)] = true
				guard(t, s.op.File())
				line, err := bufio.NewReader(s.op.File()).ReadString('\n')
				if want := fmt.Sprintf("mine %d\n", s.id); err != nil || line != want {
					t.Errorf("a StdoutPipe command's output: %q, %v; want %q", line, err, want)
				}
			}
			deadline := time.Now().Add(60 * time.Second) // a guard against hanging, not a measure
			for _, s := range lookers {
				for !strings.Contains(s.out.String(), "listed") {
					if time.Now().After(deadline) {
						t.Fatalf("a command did not list its descriptors: %q", s.out.String())
					}
					time.Sleep(5 * time.Millisecond)
				}
				for ino := range inodes {
					if strings.Contains(s.out.String(), ino) {
						t.Errorf("another command holds a StdoutPipe's pipe %s:\n%s", ino, s.out.String())
					}
				}
			}
		})
	}
}

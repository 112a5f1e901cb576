//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// TestAttackStdinPipeNotInherited: the write end a StdinPipe hands out is
// close-on-exec, so no other command started at the same moment inherits
// it (one that did would keep the first command's stdin open for as long
// as it ran, and an upstream server would never see its EOF). Commands
// with a StdinPipe and commands that list their descriptors start
// together; none of the listings holds a StdinPipe's pipe, and each
// StdinPipe command sees EOF when its pipe is closed while the others
// still run.
func TestAttackStdinPipeNotInherited(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			const n = 6
			type started struct {
				p   Process
				sp  *StdinPipe
				out *syncbuf.Buffer
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
				go func(withPipe bool) {
					defer wg.Done()
					s := started{out: &syncbuf.Buffer{}}
					req := Request{Command: "ls -l /proc/$$/fd; echo listed; sleep 60"}
					stdio := Stdio{Stdout: s.out}
					if withPipe {
						s.sp = &StdinPipe{}
						req.Command, stdio.Stdin = "cat >/dev/null; echo eof", s.sp
					}
					p, err := e.Start(context.Background(), req, stdio)
					if err != nil {
						errs <- err
						return
					}
					s.p = p
					mu.Lock()
					if withPipe {
						pipes = append(pipes, s)
					} else {
						lookers = append(lookers, s)
					}
					mu.Unlock()
				}(i%2 == 0)
			}
			wg.Wait()
			close(errs)
			t.Cleanup(func() {
				for _, s := range append(pipes, lookers...) {
					_ = s.p.Signal("KILL")
					_, _ = s.p.Wait()
				}
			})
			for err := range errs {
				t.Fatal(err)
			}
			inodes := map[string]bool{}
			for _, s := range pipes {
				var st syscall.Stat_t
				if err := syscall.Fstat(int(s.sp.File().Fd()), &st); err != nil {
					t.Fatal(err)
				}
				inodes[fmt.Sprintf("pipe:[%d]", st.Ino)] = true
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
						t.Errorf("another command holds a StdinPipe's pipe %s:\n%s", ino, s.out.String())
					}
				}
			}
			for _, s := range pipes {
				if err := s.sp.File().Close(); err != nil {
					t.Fatal(err)
				}
				done := make(chan struct{})
				go func() { defer close(done); _, _ = s.p.Wait() }()
				select {
				case <-done:
				case <-time.After(60 * time.Second):
					t.Fatalf("a StdinPipe command did not see EOF after its pipe was closed (someone else holds the write end): %q", s.out.String())
				}
				if s.out.String() != "eof\n" {
					t.Errorf("StdinPipe command's output %q, want eof", s.out.String())
				}
			}
		})
	}
}

// TestAttackStdinPipeStalledWrite: a command that never reads its stdin
// cannot hold its writer: the file is pollable, so a write deadline ends
// a blocked write (os.ErrDeadlineExceeded, having written at most the
// pipe's buffer), and killing and waiting for the command ends a write
// blocked on it with an error (EPIPE or os.ErrClosed), which the process
// survives (Go turns SIGPIPE on a descriptor other than 1 and 2 into the
// write's EPIPE).
func TestAttackStdinPipeStalledWrite(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	sp := &StdinPipe{}
	p, err := e.Start(context.Background(), Request{Command: "sleep 60"}, Stdio{Stdin: sp})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Signal("KILL"); _, _ = p.Wait() }()
	big := bytes.Repeat([]byte("x"), 4<<20)
	f := sp.File()
	if err := f.SetWriteDeadline(time.Now()); err != nil {
		t.Fatalf("SetWriteDeadline on the StdinPipe: %v (the file is not pollable)", err)
	}
	n, err := f.Write(big)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n >= len(big) {
		t.Fatalf("a write past its deadline to a command that does not read: %d bytes, %v; want os.ErrDeadlineExceeded", n, err)
	}
	if err := f.SetWriteDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	werr := make(chan error, 1)
	go func() { _, err := f.Write(big); werr <- err }()
	if err := p.Signal("KILL"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-werr:
		if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, os.ErrClosed) {
			t.Fatalf("a write blocked on a command that was killed: %v, want EPIPE or os.ErrClosed", err)
		}
	case <-time.After(60 * time.Second): // a guard against hanging, not a measure
		t.Fatal("a write blocked on a killed command did not end with Wait")
	}
}

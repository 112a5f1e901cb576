//go:build linux

package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// TestStdinPipe: with a StdinPipe as Stdin, Start hands back the write end
// of the command's stdin: what is written reaches the command, closing it
// is the command's EOF, and after Wait the file is closed (a write fails
// with os.ErrClosed instead of reaching a pipe nobody reads).
func TestStdinPipe(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			sp := &StdinPipe{}
			if sp.File() != nil {
				t.Fatal("File before Start is not nil")
			}
			var out, errOut syncbuf.Buffer
			p, err := e.Start(context.Background(), Request{Command: "cat; echo done >&2; exit 7"}, Stdio{Stdin: sp, Stdout: &out, Stderr: &errOut})
			if err != nil {
				t.Fatal(err)
			}
			f := sp.File()
			if f == nil {
				t.Fatal("File after Start is nil")
			}
			for _, line := range []string{"line one\n", "line two\n"} {
				if _, err := io.WriteString(f, line); err != nil {
					t.Fatalf("write %q: %v", line, err)
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			st, err := p.Wait()
			if err != nil || st.Code != 7 || out.String() != "line one\nline two\n" || errOut.String() != "done\n" {
				t.Fatalf("status %+v err %v out %q err %q", st, err, out.String(), errOut.String())
			}
			if err := p.CloseStdin(); err != nil {
				t.Fatalf("CloseStdin after the caller closed the pipe: %v", err)
			}
		})
	}
}

// TestStdinPipeClosedAfterWait: a caller that never closes the pipe is not
// left holding it: Wait closes it, and a later write says so.
func TestStdinPipeClosedAfterWait(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	sp := &StdinPipe{}
	p, err := e.Start(context.Background(), Request{Command: "true"}, Stdio{Stdin: sp})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || st.Code != 0 {
		t.Fatalf("status %+v err %v", st, err)
	}
	if _, err := sp.File().Write([]byte("late\n")); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("write after Wait: %v, want os.ErrClosed", err)
	}
}

// TestStdinPipeCommandClosedIt: a command that closes its stdin and runs on
// is seen at the next write (EPIPE), not when the pipe's buffer fills.
func TestStdinPipeCommandClosedIt(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	sp := &StdinPipe{}
	var out syncbuf.Buffer
	p, err := e.Start(context.Background(), Request{Command: "exec 0</dev/null; echo closed; sleep 30"}, Stdio{Stdin: sp, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		p.Signal("KILL")
		p.Wait()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "closed") {
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start: %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := sp.File().Write([]byte("x\n")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to a stdin the command closed: %v, want EPIPE", err)
	}
}

// TestStdinPipeRefusedWithPty: a pty has no pipe to hand out.
func TestStdinPipeRefusedWithPty(t *testing.T) {
	e, _ := newExec(t, ModeNone)
	_, err := e.Start(context.Background(), Request{Command: "true", Pty: &Pty{}}, Stdio{Stdin: &StdinPipe{}})
	if !errcode.Is(err, errcode.InvalidArgument) || !strings.Contains(err.Error(), "StdinPipe") {
		t.Fatalf("StdinPipe with a pty: %v, want InvalidArgument naming StdinPipe", err)
	}
}

//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
)

func init() {
	testRoles["tty-daemon"] = ttyDaemonRole
	testRoles["tiocsti"] = tiocstiRole
}

// ttyDaemonRole is a daemon started on a terminal (the test's pty is its
// controlling terminal): it runs a copy of the test binary as a command,
// in the mode given, in the role tiocsti, and prints the command's report after its own
// session id.
func ttyDaemonRole() int {
	e, err := New(Config{Mode: Mode(os.Getenv("TTY_MODE")), WorkspaceRoot: os.Getenv("TTY_WORKSPACE")})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer e.Close()
	res, err := e.Run(context.Background(), Request{Command: os.Getenv("TTY_COMMAND"), Env: map[string]string{testRoleEnv: "tiocsti"}})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	sid, _ := unix.Getsid(0)
	fmt.Printf("daemon-sid=%d\n%s%s", sid, res.Stdout, res.Stderr)
	return 0
}

// tiocstiRole is the attack: open the controlling terminal and push a
// command line into its input queue, as if typed on it.
func tiocstiRole() int {
	sid, _ := unix.Getsid(0)
	fmt.Printf("command-sid=%d\n", sid)
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		fmt.Printf("tty=%v\n", err)
		return 0
	}
	for _, c := range []byte("id\n") {
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c))); errno != 0 {
			fmt.Printf("tiocsti=%v\n", errno)
			return 0
		}
	}
	fmt.Println("tiocsti=injected")
	return 0
}

// TestCommandCannotReachDaemonTerminal: a daemon started from a terminal
// must not let a command push keystrokes into that terminal (TIOCSTI): the
// command runs in a session of its own, which has no controlling terminal.
func TestCommandCannotReachDaemonTerminal(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []Mode{ModeSoftware, ModeNone, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			if mode == ModeBwrap {
				needBwrap(t)
			}
			ptmx, tty, err := pty.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer ptmx.Close()
			// The command is a copy inside the workspace, which bwrap binds.
			ws := workspace(t)
			bin, err := os.ReadFile(self)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "attack"), bin, 0o755); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			cmd := exec.Command(self)
			cmd.Env = append(os.Environ(), testRoleEnv+"=tty-daemon", "TTY_MODE="+string(mode),
				"TTY_WORKSPACE="+ws, "TTY_COMMAND="+filepath.Join(ws, "attack"))
			cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			tty.Close()
			go io.Copy(io.Discard, ptmx) // the terminal's echo, if anything is typed
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("the daemon did not finish; output %q", out.String())
			}
			if err != nil {
				t.Fatalf("daemon: %v; output %q", err, out.String())
			}
			report := map[string]string{}
			for _, l := range strings.Split(out.String(), "\n") {
				if k, v, ok := strings.Cut(l, "="); ok {
					report[k] = v
				}
			}
			if report["daemon-sid"] == "" || report["command-sid"] == "" {
				t.Fatalf("incomplete report %q (the command did not run?)", out.String())
			}
			if report["command-sid"] == report["daemon-sid"] {
				t.Errorf("the command runs in the daemon's session %s", report["daemon-sid"])
			}
			if report["tiocsti"] == "injected" || report["tty"] == "" {
				t.Errorf("the command opened the daemon's terminal: %q", out.String())
			}
		})
	}
}

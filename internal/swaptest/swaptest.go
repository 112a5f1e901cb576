//go:build linux

// Package swaptest plays the process in the workspace that races the daemon:
// it keeps exchanging two names (a directory and a symlink to a host
// directory, a program and a FIFO) so that a name the daemon checked names
// something else when it is used. Tests of time-of-check to time-of-use
// boundaries run their operations while it swaps.
package swaptest

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Swapper exchanges two names atomically (renameat2 RENAME_EXCHANGE) until
// Stop.
type Swapper struct {
	stop  atomic.Bool
	swaps atomic.Int64
	wg    sync.WaitGroup
}

// Start exchanges a and b in a loop, pausing pause after each exchange (0:
// as fast as it can). The test's cleanup stops it if the test did not.
func Start(t testing.TB, a, b string, pause time.Duration) *Swapper {
	t.Helper()
	s := &Swapper{}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for !s.stop.Load() {
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap %s and %s: %v", a, b, err)
				return
			}
			s.swaps.Add(1)
			if pause > 0 {
				time.Sleep(pause)
			}
		}
	}()
	t.Cleanup(func() { s.Stop() })
	return s
}

// Stop ends the loop and returns how many exchanges were made. Idempotent.
func (s *Swapper) Stop() int64 {
	s.stop.Store(true)
	s.wg.Wait()
	return s.swaps.Load()
}

// Fixture is what the race is about: a scope directory "s" of a workspace,
// a host directory outside it, and "l" in the workspace, a symlink to the
// host directory. A Swapper exchanges Scope and Link, so that "s" is by
// turns the scope and a way out.
type Fixture struct {
	Scope, Link, Host string
}

// NewFixture makes it below root: the scope holds a file "scope-file", the
// host directory (standing for the host key's or the token's) a file
// "host-secret", so a listing shows which one a command ran in.
func NewFixture(t testing.TB, root string) Fixture {
	t.Helper()
	f := Fixture{Scope: filepath.Join(root, "s"), Link: filepath.Join(root, "l"), Host: t.TempDir()}
	if err := os.Mkdir(f.Scope, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(f.Scope, "scope-file"), filepath.Join(f.Host, "host-secret")} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(f.Host, f.Link); err != nil {
		t.Fatal(err)
	}
	return f
}

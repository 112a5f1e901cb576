// Package syncbuf is a bytes.Buffer that one goroutine may write while
// another reads it: the log sink of tests that watch a running server's or
// process's output.
//
// What a process or server writes reaches the buffer on a goroutine of its
// own (exec.Cmd's stderr copier, a scanner over a pipe, a handler that logs
// after its answer is sent), so a test that has seen the server answer has
// not necessarily seen its log: it waits for the text with WaitFor.
package syncbuf

import (
	"bytes"
	"sync"
	"time"
)

// Buffer is safe for concurrent Write and String. The zero value is ready.
type Buffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed at the next write; nil while no WaitFor waits
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.wake()
	return s.b.Write(p)
}

// WriteString appends str.
func (s *Buffer) WriteString(str string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.WriteString(str)
	s.wake()
}

// wake tells the waiting WaitFor calls that the buffer grew. s.mu is held.
func (s *Buffer) wake() {
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// WaitFor waits until the buffer holds want, for at most timeout, and
// reports whether it does. A test waits with a generous timeout (a hang
// guard, not a speed check) and then makes its check, which prints the
// whole buffer when the text never came.
func (s *Buffer) WaitFor(want string, timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	w := []byte(want)
	for {
		s.mu.Lock()
		if bytes.Contains(s.b.Bytes(), w) {
			s.mu.Unlock()
			return true
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			s.mu.Lock()
			defer s.mu.Unlock()
			return bytes.Contains(s.b.Bytes(), w)
		}
	}
}

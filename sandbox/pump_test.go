//go:build linux

package sandbox

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A read deadline that has already passed when pump first reads (the
// goroutine ran late on a loaded machine) must not lose the output that was
// already written: it is drained without waiting.
func TestPumpDrainsAfterLateDeadline(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()                                // still open: a process that escaped the group holds it
	want := strings.Repeat("output line\n", 10000) // 120 KB: more than one read
	go w.WriteString(want)
	// Let the writer fill the pipe (64 KiB) before the deadline passes.
	time.Sleep(50 * time.Millisecond)
	if err := r.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	var exited atomic.Bool
	exited.Store(true)
	var out bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	done := make(chan struct{})
	go func() { pump(&out, r, &exited, &wg); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang guard, not a speed check
		t.Fatal("pump blocked on a pipe whose writer is still open")
	}
	if out.Len() == 0 || !strings.HasPrefix(want, out.String()) {
		t.Fatalf("pump copied %d bytes after a past deadline; want the buffered output (a prefix of %d bytes)", out.Len(), len(want))
	}
	if out.Len() < 64<<10 {
		t.Errorf("pump copied %d bytes; the pipe held at least 64 KiB", out.Len())
	}
}

// drainBuffered never blocks: an empty pipe with its writer open returns at
// once, and a blocking descriptor is left alone.
func TestDrainBufferedDoesNotWait(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	done := make(chan struct{})
	var out bytes.Buffer
	go func() { drainBuffered(&out, r, make([]byte, 4096)); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang guard, not a speed check
		t.Fatal("drainBuffered waited on an empty pipe")
	}
	if out.Len() != 0 {
		t.Fatalf("drained %q from an empty pipe", out.String())
	}

	// r.Fd() puts the descriptor in blocking mode: then nothing is read,
	// even with data waiting, because a read could wait for ever.
	if _, err := w.WriteString("x"); err != nil {
		t.Fatal(err)
	}
	r.Fd()
	done = make(chan struct{})
	go func() { drainBuffered(&out, r, make([]byte, 4096)); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("drainBuffered read a blocking descriptor")
	}
	if out.Len() != 0 {
		t.Fatalf("drained %q from a blocking descriptor", out.String())
	}
}

// A writer that never stops (a process that escaped the group) cannot keep
// drainBuffered reading: it takes at most maxDrain bytes. The destination
// refills the pipe with every chunk it receives, so there is always more.
func TestDrainBufferedIsBounded(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := w.Write(bytes.Repeat([]byte("y"), 4096)); err != nil {
		t.Fatal(err)
	}
	out := &refillWriter{w: w}
	done := make(chan struct{})
	go func() { drainBuffered(out, r, make([]byte, 4096)); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a hang guard, not a speed check
		t.Fatal("drainBuffered kept reading a writer that never stops")
	}
	if out.n < maxDrain || out.n > maxDrain+4096 {
		t.Fatalf("drained %d bytes; want maxDrain (%d) up to one more read", out.n, maxDrain)
	}
}

// refillWriter counts what it is given and writes as much back into the
// pipe being drained.
type refillWriter struct {
	w *os.File
	n int
}

func (c *refillWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return c.w.Write(p)
}

package browser

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMessageLimit: messages within the limit pass whole, byte for byte;
// one past it is not passed on (the reader sees the end of the pipe) and
// over is called once.
func TestMessageLimit(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	in, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	// As chromedp gives them: Chromium's fd 3 and fd 4.
	cmd := &exec.Cmd{ExtraFiles: []*os.File{in, w}}
	var overs atomic.Int32
	m, err := limitMessages(cmd, 16, func() { overs.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	// w now writes into the limit, as Chromium does.
	first := []byte(`{"id":1}` + "\x00" + `{"id":2,"x":"y"}` + "\x00")
	if _, err := w.Write(first); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(first))
	if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("passed on %q, %v", got, err)
	}
	if _, err := w.Write([]byte(`{"id":3,"x":"a long value"}` + "\x00")); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil || len(rest) != 0 {
		t.Errorf("after a message past the limit: %q, %v", rest, err)
	}
	if n := overs.Load(); n != 1 {
		t.Errorf("over called %d times", n)
	}
	w.Close()
}

// TestMessagePipesHoldAMessage: both pipes of the limit hold pipeBytes, so
// an accessibility tree of a few hundred links crosses each in one piece;
// and the limit still ends at close while it waits on Chromium's pipe.
func TestMessagePipesHoldAMessage(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	in, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	cmd := &exec.Cmd{ExtraFiles: []*os.File{in, w}}
	m, err := limitMessages(cmd, MaxMessageBytes, func() {})
	if err != nil {
		t.Fatal(err)
	}
	size := func(f *os.File) int {
		rc, err := f.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if err := rc.Control(func(fd uintptr) { n, err = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// w is, in place, the write end of the pipe the limit reads (what
	// Chromium writes to); m.out is the one chromedp reads.
	if got := size(w); got < pipeBytes {
		t.Errorf("Chromium's pipe holds %d bytes, want %d", got, pipeBytes)
	}
	if got := size(m.out); got < pipeBytes {
		t.Errorf("chromedp's pipe holds %d bytes, want %d", got, pipeBytes)
	}
	m.close() // returns only once run has ended, blocked in its read
}

package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Concurrent writers and a reader: under -race this fails if a lock is missing.
func TestConcurrentWriteAndRead(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				b.Write([]byte("x"))
				b.WriteString("y")
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); len(got) != 800 || strings.Count(got, "x") != 400 {
		t.Fatalf("got %d bytes, %d x", len(got), strings.Count(got, "x"))
	}
}

// WaitFor returns once another goroutine writes the text, also when the
// text arrives in pieces across writes.
func TestWaitForSeesLaterWrites(t *testing.T) {
	var b Buffer
	b.WriteString("starting\n")
	go func() {
		time.Sleep(20 * time.Millisecond)
		b.Write([]byte("msg=list"))
		time.Sleep(20 * time.Millisecond)
		b.WriteString("ening addr=127.0.0.1\n")
	}()
	if !b.WaitFor("msg=listening", 30*time.Second) {
		t.Fatalf("WaitFor gave up; the buffer holds %q", b.String())
	}
	if !strings.Contains(b.String(), "msg=listening") {
		t.Fatalf("WaitFor returned true, the buffer holds %q", b.String())
	}
	// Already there: true at once, even with no time to wait.
	if !b.WaitFor("starting", 0) {
		t.Fatal("WaitFor(text already written, 0) = false")
	}
}

// WaitFor reports false once the timeout passes without the text, with
// writes of other text arriving meanwhile, and leaves the buffer usable.
func TestWaitForTimesOut(t *testing.T) {
	var b Buffer
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				b.WriteString("noise\n")
			}
		}
	}()
	got := b.WaitFor("never written", 50*time.Millisecond)
	close(stop)
	<-done
	if got {
		t.Fatalf("WaitFor found text nobody wrote in %q", b.String())
	}
	b.WriteString("later\n")
	if !b.WaitFor("later", time.Second) {
		t.Fatal("WaitFor after a timed-out WaitFor does not see a new write")
	}
}

// Several goroutines may wait at once; each returns when its text comes.
func TestWaitForManyWaiters(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !b.WaitFor(fmt.Sprintf("line %d\n", i), 30*time.Second) {
				t.Errorf("waiter %d gave up: %q", i, b.String())
			}
		}()
	}
	for i := 3; i >= 0; i-- {
		time.Sleep(5 * time.Millisecond)
		fmt.Fprintf(&b, "line %d\n", i)
	}
	wg.Wait()
}

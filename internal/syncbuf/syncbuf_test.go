package syncbuf

import (
	"strings"
	"sync"
	"testing"
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

package sshauth

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/admit"
)

// TestFailuresBoundedOverALongLife: logins that fail from 12,000 distinct
// addresses (IPv4 loopback and IPv6, as a client rotating its source
// address sends them) leave at most maxTrackedAddrs addresses in the
// back-off table, and the live heap within a bound; a login that succeeds
// forgets its address.
func TestFailuresBoundedOverALongLife(t *testing.T) {
	k, stranger := newKey(t), newKey(t)
	a, _, _ := setup(t, line(k)+"\n", "")
	a.opts.sleep = func(time.Duration) {}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	const n = 12000
	addr := func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("127.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)
		}
		return fmt.Sprintf("2001:db8::%x:%x", i>>16, i&0xffff)
	}
	for i := range maxTrackedAddrs / 2 {
		_, _ = a.PublicKey(from(addr(i)), stranger)
	}
	h0 := heap()
	for i := range n {
		if _, err := a.PublicKey(from(addr(i)), stranger); err == nil {
			t.Fatal("an unknown key was admitted")
		}
	}
	a.fmu.Lock()
	held := len(a.failures)
	a.fmu.Unlock()
	h1 := heap()
	t.Logf("%d failing addresses: %d in the table (bound %d); live heap %d → %d", n, held, maxTrackedAddrs, h0, h1)
	if held > maxTrackedAddrs {
		t.Errorf("%d addresses in the back-off table after %d failing ones; want at most %d", held, n, maxTrackedAddrs)
	}
	if h1 > h0+2<<20 {
		t.Errorf("live heap %d → %d after %d failing addresses; want within 2 MiB", h0, h1, n)
	}
	last := addr(n - 1)
	if _, err := a.PublicKey(from(last), k); err != nil {
		t.Fatal(err)
	}
	if _, err := a.VerifiedPublicKey(from(last), k, nil, ""); err != nil {
		t.Fatal(err)
	}
	a.fmu.Lock()
	_, still := a.failures[admit.ClientAddr(from(last).addr)]
	a.fmu.Unlock()
	if still {
		t.Errorf("%s logged in and is still in the back-off table", last)
	}
}

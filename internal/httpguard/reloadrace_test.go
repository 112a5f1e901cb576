package httpguard

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// TestReloadRaceSeesWholeSets: requests identified while the token file's
// set is swapped (SIGHUP) see one set or the other, never a mix: a token
// that the old set binds to scope "a", read-write, and the new one to
// scope "b", read-only, is always one of those two identities, and a
// token only the new set holds never gets the old set's rights. Run with
// -race, it also shows the swap needs no lock.
func TestReloadRaceSeesWholeSets(t *testing.T) {
	oldSet, err := ParseTokens("old", []byte(`{"tokens":[{"name":"t","sha256":"`+digest("tok")+`","scope":"a"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	newSet, err := ParseTokens("new", []byte(`{"tokens":[{"name":"t","sha256":"`+digest("tok")+`","scope":"b","readOnly":true},{"name":"n","sha256":"`+digest("newtok")+`","scope":"n"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var set atomic.Pointer[TokenSet]
	set.Store(oldSet)
	tok := NewTokens("", &set)
	wantOld := Identity{Name: "t", Scope: "a", Exec: true}
	wantNew := Identity{Name: "t", Scope: "b", ReadOnly: true}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				set.Store(newSet)
			} else {
				set.Store(oldSet)
			}
		}
	}()
	h := http.Header{"Authorization": {"Bearer tok"}}
	hn := http.Header{"Authorization": {"Bearer newtok"}}
	for range 20000 {
		id, ok := tok.Identify(h, nil)
		if !ok || (id != wantOld && id != wantNew) {
			t.Fatalf("identity %+v, %v: neither the old set's nor the new one's", id, ok)
		}
		if id, ok := tok.Identify(hn, nil); ok && id.Scope != "n" {
			t.Fatalf("the new token got %+v", id)
		}
	}
	close(stop)
	wg.Wait()
}

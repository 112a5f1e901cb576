package admit

import (
	"net/http"
	"testing"
)

// TestIsUpgrade: the Connection header's tokens as net/http reads them:
// any case, any of its values, spaces and tabs around a token; a token
// that only contains the word, or a Unicode space before it, is none.
func TestIsUpgrade(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   bool
	}{
		{[]string{"Upgrade"}, true}, {[]string{"keep-alive, UPGRADE"}, true}, {[]string{"close", " upgrade\t"}, true},
		{[]string{"Upgraded"}, false}, {[]string{"x-upgrade"}, false}, {nil, false},
		{[]string{"\u00a0upgrade"}, false}, {[]string{"\u0085upgrade"}, false},
	} {
		r := &http.Request{Header: http.Header{"Connection": c.values}}
		if got := IsUpgrade(r); got != c.want {
			t.Errorf("Connection %q: IsUpgrade %v, want %v", c.values, got, c.want)
		}
	}
}

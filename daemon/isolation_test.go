package daemon

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestIsolationGapsInHealth: /health's isolationGaps names what the
// effective mode does not confine, and the start-up log says the same;
// in landlock mode isolationReason says how unix sockets are handled
// (refused by seccomp below Landlock ABI 9, confined by Landlock from it).
func TestIsolationGapsInHealth(t *testing.T) {
	type health struct {
		Isolation       string   `json:"isolation"`
		IsolationReason string   `json:"isolationReason"`
		IsolationGaps   []string `json:"isolationGaps"`
	}
	modes := []string{"software"}
	abi := sandbox.LandlockABI()
	if abi >= 1 {
		modes = append(modes, "landlock")
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			c := testConfig(t)
			c.Isolation = mode
			r := start(t, c, nil)
			code, body := get(t, r.url+"/health")
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			var h health
			if err := json.Unmarshal(body, &h); err != nil {
				t.Fatalf("not JSON: %v: %s", err, body)
			}
			if h.Isolation != mode || len(h.IsolationGaps) == 0 {
				t.Fatalf("isolation %q gaps %q: %s", h.Isolation, h.IsolationGaps, body)
			}
			gaps := strings.Join(h.IsolationGaps, "\n")
			want := "no boundary"
			if mode == "landlock" {
				want = "chmod"
				unix := "unix sockets confined by Landlock"
				if abi < 9 {
					unix = "unix sockets refused by seccomp"
					if !strings.Contains(gaps, "unix sockets: refused") {
						t.Errorf("landlock ABI %d: isolationGaps do not name unix sockets: %q", abi, h.IsolationGaps)
					}
				}
				if !strings.Contains(h.IsolationReason, unix) {
					t.Errorf("landlock ABI %d: isolationReason does not say %q: %s", abi, unix, h.IsolationReason)
				}
			}
			if !strings.Contains(gaps, want) {
				t.Errorf("isolationGaps %q do not say %q", h.IsolationGaps, want)
			}
			if l := r.logs.String(); !strings.Contains(l, `msg="command isolation" mode=`+mode) || !strings.Contains(l, "gaps=") {
				t.Errorf("the start-up log does not name the gaps:\n%s", l)
			}
		})
	}
}

// TestIsolationFloorRefusesStart: with bwrap unusable (not on PATH), an
// auto daemon whose floor is bwrap does not start, and says which mode it
// got, why bwrap failed, and which flag to change; with a floor it meets,
// it starts and logs the fallback at warn.
func TestIsolationFloorRefusesStart(t *testing.T) {
	if sandbox.LandlockABI() < 1 {
		t.Skip("this kernel has no Landlock: auto would fall to software")
	}
	t.Setenv("PATH", t.TempDir()) // no bwrap
	c := testConfig(t)
	c.Isolation, c.IsolationMin = "auto", "bwrap"
	var logs syncbuf.Buffer
	d, err := New(c, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Version: "9.9.9"})
	if err == nil {
		d.Close()
		t.Fatalf("a daemon with --isolation-min bwrap started without bwrap:\n%s", logs.String())
	}
	for _, w := range []string{"below --isolation-min bwrap", "landlock mode", "bwrap is not installed", "lower --isolation-min"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal %q does not say %q", err, w)
		}
	}

	c = testConfig(t)
	c.Isolation, c.IsolationMin = "auto", "landlock"
	r := start(t, c, nil)
	if got := r.d.w.exec.Mode(); got != sandbox.ModeLandlock {
		t.Fatalf("auto without bwrap, floor landlock: %s", got)
	}
	if l := r.logs.String(); !strings.Contains(l, `level=WARN msg="command isolation fell back to a weaker mode" component=sandbox mode=landlock`) {
		t.Errorf("the fallback was not logged at warn:\n%s", l)
	}
}

package daemon

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/config"
)

// TestTokenShareOfProcessesAndWatches: with --tokens, the daemon gives the
// process and watch tools the share rule of its other pools: one token's
// background processes and watches hold at most half of each, and
// another token still starts its own.
func TestTokenShareOfProcessesAndWatches(t *testing.T) {
	r, _, _ := revocationDaemonWith(t, func(c *config.Config) {
		c.ProcessTools, c.WatchTools, c.Isolation = true, true, "software"
	}, tokenLine("alice", "alice-token", `,"scope":"a"`), tokenLine("bob", "bob-token", `,"scope":"b"`))
	for i := range 8 {
		if code, body := callAs(t, r.url, "alice-token", "", "process_start", `{"command":"sleep 60"}`); code != http.StatusOK || strings.Contains(body, `"isError":true`) {
			t.Fatalf("alice's start %d: %d %.300s", i, code, body)
		}
	}
	if _, body := callAs(t, r.url, "alice-token", "", "process_start", `{"command":"sleep 60"}`); !strings.Contains(body, `token \"alice\" holds 8 of the 16 running background processes, its share`) {
		t.Errorf("alice's ninth start: %.400s", body)
	}
	if _, body := callAs(t, r.url, "bob-token", "", "process_start", `{"command":"sleep 60"}`); strings.Contains(body, `"isError":true`) {
		t.Errorf("bob's start after alice took her share: %.400s", body)
	}
	for i := range 8 {
		must(t, callAsOK(t, r.url, "alice-token", "write_file", fmt.Sprintf(`{"path":"d%d/x","content":""}`, i)))
		if _, body := callAs(t, r.url, "alice-token", "", "watch_changes", fmt.Sprintf(`{"path":"d%d"}`, i)); strings.Contains(body, `"isError":true`) {
			t.Fatalf("alice's watch %d: %.300s", i, body)
		}
	}
	must(t, callAsOK(t, r.url, "alice-token", "write_file", `{"path":"d8/x","content":""}`))
	if _, body := callAs(t, r.url, "alice-token", "", "watch_changes", `{"path":"d8"}`); !strings.Contains(body, `token \"alice\" holds 8 of the 16 watched directories, its share`) {
		t.Errorf("alice's ninth watch: %.400s", body)
	}
	if _, body := callAs(t, r.url, "bob-token", "", "watch_changes", `{"path":"."}`); strings.Contains(body, `"isError":true`) {
		t.Errorf("bob's watch after alice took her share: %.400s", body)
	}
}

// callAsOK is callAs that fails unless the call succeeded.
func callAsOK(t *testing.T, url, token, tool, args string) error {
	t.Helper()
	code, body := callAs(t, url, token, "", tool, args)
	if code != http.StatusOK || strings.Contains(body, `"isError":true`) {
		return fmt.Errorf("%s %s: %d %.300s", tool, args, code, body)
	}
	return nil
}

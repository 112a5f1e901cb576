package upstream

import (
	"testing"
	"time"
)

// TestDefaultTimeout: a server whose file gives no timeout takes the
// daemon's --tool-timeout (the execution service's DEFAULT_TIMEOUT); one
// that gives its own keeps it.
func TestDefaultTimeout(t *testing.T) {
	cfg, err := ParseConfig("mcp.json", []byte(`{"servers":[
		{"name":"own","command":"node","timeout":5},
		{"name":"unset","command":"node"}
	]}`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(cfg.Servers[1].Timeout); got != DefaultTimeout {
		t.Errorf("unset before: %v; want %v", got, DefaultTimeout)
	}
	cfg.DefaultTimeout(0)
	if got := time.Duration(cfg.Servers[1].Timeout); got != DefaultTimeout {
		t.Errorf("unset after DefaultTimeout(0): %v", got)
	}
	cfg.DefaultTimeout(2 * time.Minute)
	if own, unset := time.Duration(cfg.Servers[0].Timeout), time.Duration(cfg.Servers[1].Timeout); own != 5*time.Second || unset != 2*time.Minute {
		t.Errorf("timeouts %v %v; want 5s (its own) and 2m (the default)", own, unset)
	}
}

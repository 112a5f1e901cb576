package srcscan

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDaemonLinksNoPrometheus: the daemon's binary links none of
// prometheus/client_golang, protobuf, expvar or procfs. internal/metrics
// writes /metrics in their place, because linked they cost 2.56 MiB resident
// at ready (docs/performance.md, "RSS at ready"); the metrics tests import
// client_golang and expfmt to check our text against theirs, which links
// them into the test binary only.
func TestDaemonLinksNoPrometheus(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/agent-backend").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 100 || !slices.Contains(pkgs, "github.com/agentbe/agentbe-daemon/internal/metrics") {
		t.Fatalf("go list -deps gave %d packages, internal/metrics not among them: not the daemon's list", len(pkgs))
	}
	for _, p := range pkgs {
		for _, banned := range []string{"github.com/prometheus/", "google.golang.org/protobuf/", "expvar"} {
			if p == banned || strings.HasPrefix(p, banned) {
				t.Errorf("cmd/agent-backend links %s: /metrics is internal/metrics's (docs/architecture.md)", p)
			}
		}
	}
}

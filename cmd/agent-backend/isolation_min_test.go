package main

import (
	"strings"
	"testing"
)

// TestIsolationMin: --check-config refuses an --isolation below
// --isolation-min naming both flags, and prints the floor of a
// configuration it accepts; a daemon whose auto isolation falls below the
// floor (no bwrap on PATH) exits at start with the mode it got, why bwrap
// failed, and the flag to change.
func TestIsolationMin(t *testing.T) {
	root := t.TempDir()
	_, errOut, code := run(t, nil, "daemon", "--root", root, "--isolation", "software", "--isolation-min", "landlock", "--check-config")
	if code != 1 || !strings.Contains(errOut, "agent-backend: invalid configuration: --isolation software is below --isolation-min landlock") {
		t.Errorf("--isolation below the floor: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = run(t, []string{"AGENTBE_ISOLATION_MIN=strong"}, "daemon", "--root", root, "--check-config")
	if code != 1 || !strings.Contains(errOut, `invalid value "strong" in AGENTBE_ISOLATION_MIN: must be one of bwrap, landlock, software, none`) {
		t.Errorf("a bad floor: exit %d, stderr %q", code, errOut)
	}
	out, errOut, code := run(t, nil, "daemon", "--root", root, "--isolation-min", "landlock", "--check-config")
	if code != 0 || !strings.Contains(out, `isolation-min: "landlock"`) {
		t.Errorf("a floor auto may meet: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	_, errOut, code = run(t, []string{"PATH=" + t.TempDir()}, "daemon", "--root", root, "--local-only", "--isolation-min", "bwrap")
	if code == 0 {
		t.Fatalf("the daemon started below its floor:\n%s", errOut)
	}
	for _, w := range []string{"below --isolation-min bwrap", "bwrap is not installed", "lower --isolation-min"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, errOut)
		}
	}
}

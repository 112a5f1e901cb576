package config

import (
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestIsolationModesComeFromSandbox: --isolation and AGENTBE_ISOLATION
// accept exactly sandbox's list of modes (sandbox.Modes), and refuse
// anything else naming that list.
func TestIsolationModesComeFromSandbox(t *testing.T) {
	var names []string
	for _, m := range sandbox.Modes() {
		names = append(names, string(m))
	}
	if len(names) == 0 {
		t.Fatal("sandbox.Modes() is empty")
	}
	list := strings.Join(names, ", ")
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		err  string
	}{
		{name: "flag docker", args: []string{"--isolation", "docker"}, err: `invalid argument "docker" for "--isolation" flag: must be one of ` + list},
		{name: "env jail", env: map[string]string{"AGENTBE_ISOLATION": "jail"}, err: `invalid value "jail" in AGENTBE_ISOLATION: must be one of ` + list},
		{name: "flag empty", args: []string{"--isolation", ""}, err: `must be one of ` + list},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v; want it to contain %q", err, tc.err)
			}
		})
	}
	for _, m := range names {
		for _, src := range []string{"flag", "env"} {
			t.Run(src+" "+m, func(t *testing.T) {
				var args []string
				var env map[string]string
				if src == "flag" {
					args = []string{"--isolation", m}
				} else {
					env = map[string]string{"AGENTBE_ISOLATION": m}
				}
				c, err := load(t, args, env)
				if err != nil || c.Isolation != m {
					t.Fatalf("--isolation %s: %q, %v", m, c.Isolation, err)
				}
				if got, err := sandbox.ParseMode(c.Isolation); err != nil || string(got) != m {
					t.Fatalf("sandbox.ParseMode(%q) = %q, %v", c.Isolation, got, err)
				}
			})
		}
	}
}

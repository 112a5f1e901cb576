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

// TestIsolationMin: --isolation-min, AGENTBE_ISOLATION_MIN and the config
// file's isolation-min take sandbox's effective modes (strongest first),
// default to none (no floor), and refuse anything else naming the flag and
// the values; an --isolation below the floor is refused naming both flags
// (auto is judged at start, when the daemon knows what it got).
func TestIsolationMin(t *testing.T) {
	var names []string
	for _, m := range sandbox.FloorModes() {
		names = append(names, string(m))
	}
	if strings.Join(names, ",") != "bwrap,landlock,software,none" {
		t.Fatalf("sandbox.FloorModes() = %v", names)
	}
	list := strings.Join(names, ", ")
	root := t.TempDir()
	file := writeFile(t, "c.yaml", "root: "+root+"\nisolation-min: landlock\n")
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		want     string // the value, or
		err      string // the error Load or Validate gives
		validErr string
	}{
		{name: "default", want: "none"},
		{name: "flag", args: []string{"--isolation-min", "bwrap"}, want: "bwrap"},
		{name: "env", env: map[string]string{"AGENTBE_ISOLATION_MIN": "software"}, want: "software"},
		{name: "file", args: []string{"--config", file}, want: "landlock"},
		{name: "flag over env", args: []string{"--isolation-min", "none"}, env: map[string]string{"AGENTBE_ISOLATION_MIN": "bwrap"}, want: "none"},
		{name: "flag auto", args: []string{"--isolation-min", "auto"}, err: `invalid argument "auto" for "--isolation-min" flag: must be one of ` + list},
		{name: "flag strong", args: []string{"--isolation-min", "strong"}, err: `invalid argument "strong" for "--isolation-min" flag: must be one of ` + list},
		{name: "env jail", env: map[string]string{"AGENTBE_ISOLATION_MIN": "jail"}, err: `invalid value "jail" in AGENTBE_ISOLATION_MIN: must be one of ` + list},
		{name: "below", args: []string{"--isolation", "software", "--isolation-min", "landlock"}, want: "landlock",
			validErr: "--isolation software is below --isolation-min landlock: the daemon would refuse to start; raise --isolation (or use auto), or lower --isolation-min"},
		{name: "none below software", args: []string{"--isolation", "none", "--isolation-min", "software"}, want: "software",
			validErr: "--isolation none is below --isolation-min software"},
		{name: "auto", args: []string{"--isolation", "auto", "--isolation-min", "bwrap"}, want: "bwrap"},
		{name: "at the floor", args: []string{"--isolation", "landlock", "--isolation-min", "landlock"}, want: "landlock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, append([]string{"--root", root}, tc.args...), tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil || c.IsolationMin != tc.want {
				t.Fatalf("isolation-min %q, %v; want %q", c.IsolationMin, err, tc.want)
			}
			err = c.Validate()
			if tc.validErr == "" && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if tc.validErr != "" && (err == nil || !strings.Contains(err.Error(), tc.validErr)) {
				t.Fatalf("Validate: %v; want it to contain %q", err, tc.validErr)
			}
		})
	}
}

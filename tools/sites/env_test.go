package sites

import (
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// TestReservedEnvRefusesWhatTheSandboxDrops: every name the sandbox drops
// from a command's environment (policy.DeniedEnv) is refused by the site
// with a 400 that says so, in any case, rather than accepted and then
// dropped without a word; a name neither rule knows passes.
func TestReservedEnvRefusesWhatTheSandboxDrops(t *testing.T) {
	names := []string{"BASH_ENV", "ENV", "IFS", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND",
		"CDPATH", "GLOBIGNORE", "BASH_XTRACEFD", "HOME", "PWD", "LD_PRELOAD", "LD_AUDIT", "DYLD_INSERT_LIBRARIES"}
	for _, k := range names {
		if !policy.DeniedEnv(k) {
			t.Fatalf("%s: the sandbox no longer drops it; update the list", k)
		}
		for _, name := range []string{k, strings.ToLower(k)} {
			_, err := checkEnv(map[string]string{name: "x"})
			if err == nil || !strings.Contains(err.Error(), name+" is reserved") {
				t.Errorf("env %s: %v, want a refusal that it is reserved", name, err)
			}
		}
	}
	if _, err := checkEnv(map[string]string{"MY_SETTING": "x"}); err != nil {
		t.Errorf("env MY_SETTING: %v, want it allowed", err)
	}
}

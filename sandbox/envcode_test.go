//go:build linux

package sandbox

import "testing"

func TestEnvRunsCode(t *testing.T) {
	for _, name := range []string{"GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_SSH_COMMAND", "git_pager", "NODE_OPTIONS", "PYTHONSTARTUP",
		"PYTHONBREAKPOINT", "npm_config_script_shell", "PERL5OPT", "GOFLAGS", "XDG_CONFIG_HOME", "OPENSSL_CONF", "TAR_OPTIONS", "PAGER", "CARGO_BUILD_RUSTC_WRAPPER"} {
		if ok, why := EnvRunsCode(name); !ok || why == "" {
			t.Errorf("%s: not refused (%q)", name, why)
		}
	}
	for _, name := range []string{"FOO", "DEBUG", "TZ", "NO_COLOR", "CI", "TERM", "GITHUB_TOKEN_X", "MY_GIT_VAR"} {
		if ok, why := EnvRunsCode(name); ok {
			t.Errorf("%s: refused (%s)", name, why)
		}
	}
}

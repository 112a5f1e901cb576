package config

import (
	"os/exec"
	"testing"
)

// TestTokenRef: the shell's name for the token in use, by its source,
// never the value.
func TestTokenRef(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct {
		name string
		c    Config
		env  map[string]string
		want string
	}{
		{"none", Config{}, nil, ""},
		{"file", Config{AuthTokenFile: "/etc/agentbe/token", AuthToken: "v"}, nil, "$(cat /etc/agentbe/token)"},
		{"file with a space", Config{AuthTokenFile: "/tmp/my token", AuthToken: "v"}, nil, "$(cat '/tmp/my token')"},
		{"AGENTBE_AUTH_TOKEN", Config{AuthToken: "v"}, map[string]string{"AGENTBE_AUTH_TOKEN": "v", "AUTH_TOKEN": "v"}, "$AGENTBE_AUTH_TOKEN"},
		{"AUTH_TOKEN", Config{AuthToken: "v"}, map[string]string{"AUTH_TOKEN": "v"}, "$AUTH_TOKEN"},
		{"flag over the variable", Config{AuthToken: "flag"}, map[string]string{"AGENTBE_AUTH_TOKEN": "env"}, "<the value of --auth-token>"},
		{"flag", Config{AuthToken: "v"}, nil, "<the value of --auth-token>"},
		{"flag or config file", Config{AuthToken: "v", ConfigFile: "/etc/agentbe/c.yaml"}, nil, "<the auth token of --auth-token or --config /etc/agentbe/c.yaml>"},
		{"tokens file", Config{TokensFile: "/etc/agentbe/tokens.json"}, nil, "<a token whose digest is in --tokens /etc/agentbe/tokens.json>"},
	} {
		if got := tc.c.TokenRef(env(tc.env)); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestShellQuote: sh reads each quoted word back as the string.
func TestShellQuote(t *testing.T) {
	for _, s := range []string{"/plain/path", "/a b", "it's", "$(rm -rf x)", "`x`", "a\"b", ""} {
		out, err := exec.Command("sh", "-c", "printf %s "+ShellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("ShellQuote(%q) = %s: sh reads %q (%v)", s, ShellQuote(s), out, err)
		}
	}
	if got := ShellQuote("/etc/agentbe/token"); got != "/etc/agentbe/token" {
		t.Errorf("a plain path is quoted: %s", got)
	}
}

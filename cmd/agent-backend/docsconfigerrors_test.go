package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsConfigurationErrorLines: the error lines docs/configuration.md
// quotes as examples (a bad flag value, a bad variable, a bad and an
// unknown config-file key, an unknown flag, an operator file inside the
// workspace) are the binary's own, word for
// word, so a reworded message cannot leave the reference quoting the old
// one. The docs' config file is /etc/agentbe/config.yaml and their root
// /srv/ws; the test's lie in temporary directories and are named back
// before the comparison.
func TestDocsConfigurationErrorLines(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	root := t.TempDir()
	const docFile, docRoot = "/etc/agentbe/config.yaml", "/srv/ws"
	file := filepath.Join(t.TempDir(), "config.yaml")
	tests := []struct {
		name   string
		config string // the config file's content; none when empty
		env    []string
		args   []string
	}{
		{name: "flag value", args: []string{"daemon", "--root", root, "--port", "70000"}},
		{name: "variable", env: []string{"AGENTBE_ISOLATION=jail"}, args: []string{"daemon", "--root", root}},
		{name: "file value", config: "port: abc\n", args: []string{"daemon", "--root", root, "--config", file}},
		{name: "file key", config: "prot: 3000\n", args: []string{"daemon", "--root", root, "--config", file}},
		{name: "unknown flag", args: []string{"daemon", "--prot", "3000"}},
		{name: "operator file inside", args: []string{"daemon", "--root", root, "--exec-approvals", filepath.Join(root, "policy.json")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.config != "" {
				if err := os.WriteFile(file, []byte(tt.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, errOut, code := run(t, tt.env, tt.args...)
			line := strings.ReplaceAll(strings.TrimSpace(errOut), file, docFile)
			line = strings.ReplaceAll(line, root, docRoot)
			if code != 1 || strings.Contains(line, "\n") || line == "" {
				t.Fatalf("exit %d, stderr %q; want exit 1 and one line", code, errOut)
			}
			quoted := strings.TrimPrefix(line, "agent-backend: ")
			if !strings.Contains(doc, line) && !strings.Contains(doc, "`"+quoted+"`") {
				t.Errorf("docs/configuration.md does not quote the line the binary prints:\n%s", line)
			}
		})
	}
}

package bench_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// compare.sh refuses what it cannot use before it builds or starts
// anything, with one line naming the argument, and exit 2.
func TestCompareScriptArguments(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		args     []string
		code     int
		stderr   string // the whole first line of stderr
		stdoutIn string // something the output must contain
	}{
		{"unknown argument", []string{"--bogus"}, 2, "compare.sh: unknown argument --bogus", ""},
		{"missing workspaces dir", []string{"--workspaces", "/nonexistent/agentbe"}, 2,
			"compare.sh: --workspaces /nonexistent/agentbe: not a writable directory", ""},
		{"workspaces is a file", []string{"--workspaces", file}, 2,
			"compare.sh: --workspaces " + file + ": not a writable directory", ""},
		{"help names every option", []string{"--help"}, 0, "", "--workspaces DIR"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("bash", append([]string{"compare.sh"}, c.args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, c.code, stderr.String())
			}
			if first, _, _ := strings.Cut(stderr.String(), "\n"); first != c.stderr {
				t.Errorf("stderr %q, want %q", first, c.stderr)
			}
			if !strings.Contains(stdout.String(), c.stdoutIn) {
				t.Errorf("stdout lacks %q:\n%s", c.stdoutIn, stdout.String())
			}
		})
	}
}

// bench/features.sh turns on every optional feature: each flag of a row of
// the daemon's composition table (daemon/parts.go) is among its flags, so
// "RSS at ready, every optional feature on" stays that when a provider is
// added; and the upstreams file it writes is the JSON the daemon reads,
// whatever the command's path holds.
func TestFeaturesTurnEveryPartOn(t *testing.T) {
	parts, err := os.ReadFile("../daemon/parts.go")
	if err != nil {
		t.Fatal(err)
	}
	flags := regexp.MustCompile(`flag: "(--[a-z-]+)"`).FindAllStringSubmatch(string(parts), -1)
	if len(flags) < 5 {
		t.Fatalf("found %d flags in daemon/parts.go: has the table moved?", len(flags))
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "-c", `set -euo pipefail; . ./features.sh; all_features "$1" 127.0.0.1:2222 "$2" echo-mcp-stdio 'an "arg"'; printf '%s\n' "${features[@]}"`,
		"bash", dir, `/a dir/with "quotes"\and/loadgen`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("all_features: %v", err)
	}
	got := map[string]bool{}
	for _, f := range strings.Split(string(out), "\n") {
		got[f] = true
	}
	for _, f := range flags {
		if !got[f[1]] {
			t.Errorf("features.sh does not turn on %s (daemon/parts.go); its flags:\n%s", f[1], out)
		}
	}
	var up struct {
		Servers []struct {
			Name    string   `json:"name"`
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"servers"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "upstreams.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &up); err != nil {
		t.Fatalf("upstreams.json: %v\n%s", err, b)
	}
	if len(up.Servers) != 1 || up.Servers[0].Name != "echo" || up.Servers[0].Command != `/a dir/with "quotes"\and/loadgen` ||
		strings.Join(up.Servers[0].Args, "|") != `echo-mcp-stdio|an "arg"` {
		t.Errorf("upstreams.json: %s", b)
	}
}

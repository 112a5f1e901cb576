package main

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testbin"
)

// TestInitDoesNoFeatureWork: the packages of this module whose work belongs
// to a feature's first use (the token-name, tool-name and extension-name
// rules, SQLite's heap limit, the tool sites' patterns) allocate nothing at
// initialisation, in the binary as it is built for release. A package-level
// regexp or table in one of them would be paid at every daemon's start
// (docs/performance.md, "RSS at ready"). GODEBUG=inittrace=1 prints a line
// for every package initialisation that does work.
func TestInitDoesNoFeatureWork(t *testing.T) {
	cmd := exec.Command(testbin.Path(t), "--version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agent-backend --version: %v\n%s", err, stderr.String())
	}
	// init PKG @0.12 ms, 0.003 ms clock, 376 bytes, 10 allocs
	const module = "github.com/agentbe/agentbe-daemon/"
	allocated := map[string]int{}
	for _, line := range strings.Split(stderr.String(), "\n") {
		f := strings.Fields(line)
		if len(f) != 11 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		n, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", line, err)
		}
		allocated[f[1]] = n
	}
	if _, ok := allocated[module+"fsops"]; !ok {
		t.Fatalf("no inittrace line for fsops (whose initialisation does allocate): the format changed?\n%s", stderr.String())
	}
	for _, pkg := range []string{"internal/httpguard", "tools/registry", "tools/extensions", "tools/sites"} {
		if n := allocated[module+pkg]; n > 1024 {
			t.Errorf("%s allocates %d bytes at initialisation; make what it builds on first use (sync.OnceValue)", pkg, n)
		}
	}
}

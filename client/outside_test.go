package client

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestUsableFromAnotherModule: a program in a module of its own imports
// github.com/agentbe/agentbe-daemon/client the way docs/client.md says
// while the module is not on the Go module proxy: `go work init . CLONE`
// (a go.work that uses the clone), no require and no replace in its
// go.mod. It builds offline (GOPROXY=off: only the local module cache,
// which the clone's own build filled) and runs, writing and reading a file
// of a memory backend. GOFLAGS is cleared: workspace mode refuses -mod=mod.
//
// Workspace mode reads the go.mod of every module the clone requires,
// the ones no Linux build of the clone needs included (cobra's
// Windows-only mousetrap), which building the clone does not put in the
// module cache. So the test first lists the clone's module graph with the
// environment's GOPROXY (`go list -m all`, what a user's first build in
// workspace mode fetches), and only then builds offline: on a fresh
// machine the result no longer depends on which earlier command happened
// to fetch those files.
func TestUsableFromAnotherModule(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH (this test runs go build)")
	}
	clone, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	graph := exec.Command(goBin, "list", "-m", "all")
	graph.Dir = clone
	if out, err := graph.CombinedOutput(); err != nil {
		testenv.Missing(t, fmt.Sprintf("the go.mod files of the clone's module graph are not in the module cache "+
			"and the Go module proxy did not give them (go list -m all: %v: %s)", err, firstLine(out)))
	}
	dir := t.TempDir()
	const prog = `package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentbe/agentbe-daemon/client"
)

func main() {
	ctx := context.Background()
	m, err := client.NewMemory(client.MemoryOptions{})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer m.Destroy()
	if err := m.Write(ctx, "hello.txt", []byte("from another module")); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	b, err := m.Read(ctx, "hello.txt")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println(string(b))
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GOFLAGS=", "GOPROXY=off", "GOWORK=", "GO111MODULE=on")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goBin, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// The documented steps, word for word (docs/client.md).
	run("mod", "init", "example.com/outside")
	run("work", "init", ".", clone)
	run("build", "-o", "outside", ".")
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(gomod), "replace") || strings.Contains(string(gomod), "agentbe") {
		t.Fatalf("the outside module's go.mod names the clone:\n%s", gomod)
	}
	out, err := exec.Command(filepath.Join(dir, "outside")).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "from another module" {
		t.Fatalf("the outside program: %v, %q; want %q", err, out, "from another module")
	}
}

// firstLine is out's first line, for a message.
func firstLine(out []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(out), []byte("\n"))
	return string(line)
}

package wsclient

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestClientDependencies: a program that imports only this package gets none
// of the daemon's server packages and none of the modules only deploy's tests
// use, and those modules are not in the daemon's go.mod at all (deploy/ is
// its own module). The Go client library builds on this package, so what it
// drags in is what every client program compiles.
func TestClientDependencies(t *testing.T) {
	const self = "github.com/agentbe/agentbe-daemon/"
	// The daemon's packages a client may reach: this one, the adapter, the
	// string cut the adapter's close frames use and the timer its
	// keepalive runs on (both portable, no imports beyond the standard
	// library).
	allowed := map[string]bool{self + "ssh/wsclient": true, self + "internal/wsnet": true, self + "internal/clip": true, self + "internal/tick": true}
	// Module path prefixes that must not reach a client, nor the daemon's go.mod.
	banned := []string{"k8s.io/", "sigs.k8s.io/kustomize", "sigs.k8s.io/yaml", "github.com/moby/buildkit"}

	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages; want the standard library's and gorilla's too:\n%s", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, self) && !allowed[p] {
			t.Errorf("wsclient depends on the daemon's package %s", p)
		}
		for _, b := range banned {
			if strings.HasPrefix(p, b) {
				t.Errorf("wsclient depends on %s (%s is for deploy's tests only)", p, b)
			}
		}
	}

	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "module github.com/agentbe/agentbe-daemon\n") {
		t.Fatalf("../../go.mod is not the daemon's:\n%s", mod)
	}
	for _, line := range strings.Split(string(mod), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 && f[0] == "require" {
			f = f[1:] // a one-line require
		}
		if len(f) == 0 {
			continue
		}
		for _, b := range banned {
			if strings.HasPrefix(f[0], b) {
				t.Errorf("the daemon's go.mod requires %s; it belongs in deploy/go.mod", f[0])
			}
		}
	}
}

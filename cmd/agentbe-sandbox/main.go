//go:build linux

// Command agentbe-sandbox is the sandbox's trampoline as a program of its
// own: what `agent-backend sandbox-exec` does (sandbox/sandboxexec), in a
// binary that links only that package, the standard library and
// golang.org/x/sys. The daemon starts a trampoline for every command of
// the landlock isolation mode and for every transaction it cannot mount in
// place (a daemon that is not root, or runs commands --run-as another
// user); started as agent-backend, each of those first pays the whole
// daemon's package initialization (about 200 packages). When this program
// is installed beside agent-backend (or named by --sandbox-helper), the
// daemon validates it once at start, keeps it open and starts it through
// that descriptor instead (sandbox/trampoline.go, docs/security.md);
// without it the daemon is its own trampoline, as fast as before and no
// less safe.
//
// It is not meant to be run by hand: started without the trampoline's
// arguments it says so and exits 2.
package main

import (
	"fmt"
	"os"

	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

func main() {
	// Never returns when started as the trampoline.
	sandboxexec.Main()
	fmt.Fprintf(os.Stderr, "agentbe-sandbox: the sandbox trampoline of agent-backend (protocol %d); the daemon starts it, it is not meant to be run by hand (docs/security.md)\n", sandboxexec.Protocol)
	os.Exit(2)
}

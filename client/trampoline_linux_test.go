//go:build linux

package client

import "github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"

// trampoline makes the test binary the landlock mode's trampoline, so that
// a Local backend may pick that mode (sandboxexec.Main).
func trampoline() { sandboxexec.Main() }

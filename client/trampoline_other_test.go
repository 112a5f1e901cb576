//go:build !linux

package client

// trampoline: off Linux there is no sandbox and no trampoline.
func trampoline() {}

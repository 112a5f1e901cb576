//go:build !linux

package sandbox

// The daemon runs only on Linux: the sandbox is built on bubblewrap, /proc,
// cgroups, prctl (child subreaper, parent-death signal) and Linux's
// SysProcAttr, so every other file of this package is built for Linux only.
// On any other GOOS the identifier below is undefined on purpose, and the
// build stops with this name as its one error.
var _ = agentbeDaemonBuildsOnlyOnLinux

//go:build linux

package sandbox

import "os/exec"

// noIsolation runs a command as a plain host process without the policy
// (New does not build one for ModeNone) and without escape checks: trusted
// use only. It starts, waits and kills exactly as software mode does.
type noIsolation struct{ e *executor }

func (noIsolation) mode() Mode                        { return ModeNone }
func (noIsolation) escapeChecks() bool                { return false }
func (noIsolation) ownsTree() bool                    { return false }
func (noIsolation) directOK() bool                    { return true }
func (noIsolation) visible(string, string, bool) bool { return true }
func (noIsolation) runs(hdr []byte) bool              { return hostRuns(hdr) }
func (noIsolation) scriptPrefix(string) string        { return "" }
func (n noIsolation) command(p program, wd *workdir, pty bool) *exec.Cmd {
	return hostCommand(n.e, p, wd, pty)
}

func (noIsolation) filtersSpawner() bool { return false }

func (noIsolation) rootWarning(*executor) string { return "" }

func (noIsolation) gaps(*executor) []string {
	return []string{"everything: no policy and no sandbox (trusted use only)"}
}

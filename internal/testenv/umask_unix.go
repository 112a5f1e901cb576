//go:build unix

package testenv

import "syscall"

// OperatorUmask adds group and other write to the process's umask (and
// keeps whatever else it masks), for the packages whose tests write the
// operator's files. The daemon refuses a token, key or config file that a
// user other than its owner could change, or one in such a directory
// (internal/opfile), and t.TempDir makes its directories with mode 0777
// less the umask: under a umask of 002 (a common default for users with a
// group of their own) every such fixture would be refused. An operator
// makes these files so that only they can change them; the fixtures are
// made the same way, and the tests that need a file others can write make
// it with an explicit chmod. Call it from TestMain, before m.Run.
func OperatorUmask() {
	old := syscall.Umask(0)
	syscall.Umask(old | 0o022)
}

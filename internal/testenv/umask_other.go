//go:build !unix

package testenv

// OperatorUmask does nothing where there is no umask.
func OperatorUmask() {}

package testenv

import (
	"strings"
	"testing"
)

// HostileFile is one file named where a token (or another small file the
// operator or user gives) is read, and what the refusal must say of it.
type HostileFile struct {
	Path string // the file
	Want string // what the refusal says of it: "a FIFO", "larger than"
}

// RefusesHostileFiles calls read on each of HostileFiles and requires an
// error that names the file and what is wrong with it. call names read in
// the failure ("readTokenFile", "proxyToken").
func RefusesHostileFiles(t *testing.T, call string, read func(name string) (string, error)) {
	t.Helper()
	for _, c := range HostileFiles(t) {
		if tok, err := read(c.Path); err == nil || !strings.Contains(err.Error(), c.Want) || !strings.Contains(err.Error(), c.Path) {
			t.Errorf("%s(%s): %d bytes, %v; want an error naming the file and %q", call, c.Path, len(tok), err, c.Want)
		}
	}
}

//go:build linux

package sandbox

import (
	"go/build"
	"slices"
	"testing"
)

// TestBuildsOnlyOnLinux keeps the platform stance of sandbox/unsupported.go:
// for any other GOOS the package must consist of that one file, so building
// the daemon there stops with its one clear error, not with a list of
// Linux-only symbols from a file that lacks the linux constraint.
func TestBuildsOnlyOnLinux(t *testing.T) {
	for _, tc := range []struct {
		goos string
		want []string
	}{
		{"darwin", []string{"unsupported.go"}},
		{"freebsd", []string{"unsupported.go"}},
		{"windows", []string{"unsupported.go"}},
	} {
		t.Run(tc.goos, func(t *testing.T) {
			ctx := build.Default
			ctx.GOOS = tc.goos
			ctx.GOARCH = "amd64"
			pkg, err := ctx.ImportDir(".", 0)
			if err != nil {
				t.Fatalf("GOOS=%s: %v", tc.goos, err)
			}
			if !slices.Equal(pkg.GoFiles, tc.want) {
				t.Errorf("GOOS=%s builds %v; want only %v (give every other file //go:build linux)", tc.goos, pkg.GoFiles, tc.want)
			}
		})
	}
	// On Linux the guard must stay out of the build.
	pkg, err := build.Default.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pkg.GoFiles, "unsupported.go") {
		t.Errorf("GOOS=linux builds unsupported.go; it must be //go:build !linux")
	}
}

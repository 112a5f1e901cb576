package policy

import (
	"go/build"
	"slices"
	"strings"
	"testing"
)

// TestPortable: the policy is the same Go on every system (the client
// library's remote backend judges commands with it on macOS too): no file
// is left out by a build constraint, and nothing is imported from
// golang.org/x/sys or the executor.
func TestPortable(t *testing.T) {
	var linux []string
	for _, goos := range []string{"linux", "darwin", "windows"} {
		ctx := build.Default
		ctx.GOOS, ctx.GOARCH = goos, "amd64"
		pkg, err := ctx.ImportDir(".", 0)
		if err != nil {
			t.Fatalf("GOOS=%s: %v", goos, err)
		}
		if len(pkg.IgnoredGoFiles) > 0 {
			t.Errorf("GOOS=%s leaves out %v", goos, pkg.IgnoredGoFiles)
		}
		if linux == nil {
			linux = pkg.GoFiles
		} else if !slices.Equal(pkg.GoFiles, linux) {
			t.Errorf("GOOS=%s builds %v, linux %v", goos, pkg.GoFiles, linux)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "golang.org/x/sys") || strings.HasPrefix(imp, "github.com/agentbe/agentbe-daemon/sandbox") || imp == "syscall" {
				t.Errorf("GOOS=%s: the policy imports %s", goos, imp)
			}
		}
	}
	if len(linux) < 5 {
		t.Fatalf("found %v; the check looked at too little", linux)
	}
}

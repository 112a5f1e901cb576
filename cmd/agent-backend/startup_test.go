package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokensFileErrors runs a --tokens file with a mistake through the
// binary, as --check-config and as a start: one line naming the file, the
// entry and the key, and the key meant where one is near.
func TestTokensFileErrors(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	sum := sha256.Sum256([]byte("ci-token"))
	digest := hex.EncodeToString(sum[:])
	file := filepath.Join(dir, "tokens.json")
	for _, tc := range []struct{ body, want string }{
		{`{"tokens":[{"name":"alice","sha256":"` + strings.Repeat("ab", 32) + `"},{"name":"ci","sha256":"` + digest + `","scop":"ci"}]}`,
			`--tokens ` + file + `: tokens[1] ("ci"): unknown key "scop"; did you mean "scope"?`},
		{`{"tokens":[{"name":"ci","sha256":"` + digest + `","read_only":true}]}`,
			`--tokens ` + file + `: tokens[0] ("ci"): unknown key "read_only"; did you mean "readOnly"?`},
		{`{"token":[]}`, `--tokens ` + file + `: unknown key "token" at the top level; did you mean "tokens"?`},
	} {
		if err := os.WriteFile(file, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, code := run(t, nil, "daemon", "--root", root, "--tokens", file, "--check-config")
		if want := "agent-backend: invalid configuration: " + tc.want + "\n"; code != 1 || errOut != want {
			t.Errorf("--check-config: exit %d, stderr %q\nwant exit 1 and %q", code, errOut, want)
		}
		_, errOut, code = run(t, nil, "daemon", "--root", root, "--tokens", file, "--port", fmt.Sprint(freePort(t)))
		if code != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("start: exit %d, stderr %q\nwant exit 1 and a line containing %q", code, errOut, tc.want)
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSiteServeRightsFilesOthersCanChange: site serve's --config (it names
// the token and the secrets), its --token-file (it admits callers) and its
// --env-file (secrets the commands get) are read as every file that grants
// rights (internal/opfile): world-writable, each stops the start with a
// line naming the flag, the file and the fix.
func TestSiteServeRightsFilesOthersCanChange(t *testing.T) {
	dir := exampleSiteDir(t, "")
	secrets := t.TempDir()
	for _, tc := range []struct{ flag, name, body string }{
		{"--config", "site.toml", "port = 8000\n"},
		{"--token-file", "token", "site-token-Hq3v\n"},
		{"--env-file", "site.env", "API_KEY=x\n"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			p := filepath.Join(secrets, tc.name)
			if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o666); err != nil {
				t.Fatal(err)
			}
			_, errOut, code := run(t, nil, "site", "serve", dir, tc.flag, p)
			// The env file is read once the sandbox is probed, whose
			// lines come first: the error is the last line.
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			last := lines[len(lines)-1]
			for _, want := range []string{"agent-backend: " + tc.flag, p, "is writable by its group or by others", "chmod go-w " + p} {
				if code != 1 || !strings.Contains(last, want) {
					t.Errorf("exit %d, stderr %q; want its last line to say %q", code, errOut, want)
				}
			}
		})
	}
}

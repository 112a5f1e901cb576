package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzLoadApprovals: an --exec-approvals file is taken only when it is one
// JSON value that encoding/json reads as the same policy (nothing after it
// left unread), with every command a name or an absolute path and every
// pattern compiled; an error names the file; and the policy as persist
// writes it loads back the same.
func FuzzLoadApprovals(f *testing.F) {
	for _, s := range []string{
		`{"allowlist":{"commands":["echo","/usr/bin/git"],"cwdPrefix":["$workspaceRoot/src"]},"denylist":{"patterns":["rm -rf","^su "]}}`,
		`{"denylist":{"patterns":["("]}}`,
		`{"allowlist":{"commands":["bin/x"]}}`,
		`{"allowlist":{"commands":[""]}}`,
		`{"allowlist":{"commands":["echo"]}} {"denylist":{"patterns":["echo"]}}`,
		`{"allowlist":{}}x`,
		`{"unknown":1}`,
		`{}`,
		``,
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "exec-approvals.json")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		a, err := LoadApprovals(p, ModeAllowlist, AskOff, "/ws", 0)
		if err != nil {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		var want Policy
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%q taken as %+v, but encoding/json reads no policy in it: %v", data, a.policy, err)
		}
		if !reflect.DeepEqual(want, a.policy) {
			t.Fatalf("%q taken as %+v; encoding/json reads %+v", data, a.policy, want)
		}
		if len(a.deny) != len(a.policy.Denylist.Patterns) {
			t.Fatalf("%d patterns, %d compiled", len(a.policy.Denylist.Patterns), len(a.deny))
		}
		for _, c := range a.policy.Allowlist.Commands {
			if c == "" || strings.Contains(c, "/") && !filepath.IsAbs(c) {
				t.Fatalf("took command %q", c)
			}
		}
		out, err := json.MarshalIndent(a.policy, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(out, '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := LoadApprovals(p, ModeAllowlist, AskOff, "/ws", 0)
		if err != nil || !reflect.DeepEqual(b.policy, a.policy) {
			t.Fatalf("%+v written as %s loads as %+v, %v", a.policy, out, b, err)
		}
	})
}

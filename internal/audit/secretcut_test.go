package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttackSecretStraddlingTheCut: a secret placed so that the cut at
// MaxString bytes falls inside it (in a command, in a tool's argument, in
// an argument whose JSON spells the secret with \u escapes, in a nested
// one) is redacted before the cut, so no prefix of it reaches the file:
// cutting first left its first bytes in the line, where the whole-secret
// replacement no longer found it.
func TestAttackSecretStraddlingTheCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Options{Path: path, Secrets: []string{token}})
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("a", MaxString-6) // the cut falls 6 bytes into the token
	var escaped strings.Builder
	for _, r := range token {
		fmt.Fprintf(&escaped, `\u%04x`, r)
	}
	callThrough(t, l,
		`exec {"command":"`+pad+token+`"}`,
		`exec {"command":"`+pad+escaped.String()+`"}`,
		`exec {"deep":{"list":["`+pad+token+`"]}}`,
	)
	l.Write(Record{Time: time.Now(), Face: "ssh", Tool: "ssh.exec", Command: pad + token, Outcome: "ok"})
	l.Write(Record{Time: time.Now(), Face: "ssh", Tool: pad + token, Scope: pad + token, Outcome: "ok"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 5 {
		t.Fatalf("%d lines, want 5:\n%s", n, data)
	}
	if strings.Contains(string(data), token[:6]) {
		t.Errorf("the audit log holds the token's first bytes:\n%s", data)
	}
	// Each secret became the marker, itself cut where the secret was.
	if c := strings.Count(string(data), Redacted[:6]); c != 6 {
		t.Errorf("%d redactions, want one per secret (6):\n%s", c, data)
	}
}

package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentbe/agentbe-daemon/internal/clip"
)

// TestAttackSecretStraddlingTheCut: a secret placed so that the cut at
// MaxString bytes falls inside it (in a command, in a tool's argument, in
// an argument whose JSON spells the secret with \u escapes, in a nested
// one) is redacted before the cut, so no prefix of it reaches the file:
// cutting first left its first bytes in the line, where the whole-secret
// replacement no longer found it.
func TestAttackSecretStraddlingTheCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Options{Path: path, Secrets: clip.NewSecrets(token)})
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

// TestAttackAuditLinesCannotBeForged: a tool name, scope, caller, session
// or command holding a newline and a whole forged record, CR, NUL, an ANSI
// escape, U+2028 and U+2029 (line breaks to a JavaScript reader), and
// bytes that are not UTF-8, in the fields and the arguments, still makes
// one line per record, each one JSON object, with none of these raw.
func TestAttackAuditLinesCannotBeForged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	evil := "x\n{\"time\":\"2026-01-01T00:00:00Z\",\"face\":\"ssh\",\"tool\":\"ssh.exec\",\"outcome\":\"ok\"}\r\x00\x1b[2J\u2028\u2029\xff\xfe"
	l.Write(Record{Time: time.Now(), Face: "rest", Tool: evil, Scope: evil, Caller: evil, Session: evil, Command: evil, Outcome: "ok"})
	callThrough(t, l, `exec {"command":"x\n{\"forged\":1}\u2028\u0000\u001b"}`, "exec {\"command\":\"\xff\xfe\"}")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines for 3 records:\n%s", len(lines), data)
	}
	for _, ln := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(ln), &e); err != nil {
			t.Errorf("not one JSON object: %v: %q", err, ln)
		}
		if strings.ContainsAny(ln, "\r\x00\x1b\u2028\u2029") || !utf8.ValidString(ln) {
			t.Errorf("a raw control character, line separator or invalid UTF-8: %q", ln)
		}
	}
}

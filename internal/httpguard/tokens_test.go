package httpguard

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func digest(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

func TestParseTokens(t *testing.T) {
	good := `{"tokens":[
		{"name":"alice","sha256":"` + digest("a-token") + `","scope":"/users/alice/"},
		{"name":"ci.ro","sha256":"` + digest("ci-token") + `","readOnly":true},
		{"name":"noexec","sha256":"` + digest("n-token") + `","scope":"x","exec":false}]}`
	set, err := ParseTokens("t.json", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	tok := NewTokens("", ptr(set))
	for cred, want := range map[string]Identity{
		"a-token":  {Name: "alice", Scope: "users/alice", Exec: true},
		"ci-token": {Name: "ci.ro", ReadOnly: true},
		"n-token":  {Name: "noexec", Scope: "x"},
	} {
		h := http.Header{"Authorization": {"Bearer " + cred}}
		if id, ok := tok.Identify(h, nil); !ok || id != want {
			t.Errorf("Identify(%s) = %+v, %v; want %+v", cred, id, ok, want)
		}
	}
	bad := map[string]string{
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `","read_only":true}]}`:                                        `--tokens t.json: tokens[0] ("a"): unknown key "read_only"; did you mean "readOnly"?`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `"},{"name":"ci","sha256":"` + digest("y") + `","scop":"x"}]}`: `--tokens t.json: tokens[1] ("ci"): unknown key "scop"; did you mean "scope"?`,
		`{"tokens":[{"sha256":"` + digest("x") + `","colour":"x"}]}`:                                                       `--tokens t.json: tokens[0]: unknown key "colour"; the keys are name, sha256, scope, readOnly, exec`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `","readOnly":"yes"}]}`:                                        `--tokens t.json: tokens[0] ("a"): "readOnly" must be true or false, not a JSON string`,
		`{"tokens":[{"name":7,"sha256":"` + digest("x") + `"}]}`:                                                           `--tokens t.json: tokens[0]: "name" must be a string, not a JSON number`,
		`{"tokens":["abc"]}`:                     `--tokens t.json: tokens[0]: must be an object such as {"name":...,"sha256":...}, not a JSON string`,
		`{"tokens":{}}`:                          `--tokens t.json: "tokens" must be an array of entries, not a JSON object`,
		`{"token":[]}`:                           `--tokens t.json: unknown key "token" at the top level; did you mean "tokens"?`,
		`{"users":[]}`:                           `--tokens t.json: unknown key "users" at the top level; the file is {"tokens":[...]}`,
		"{\"tokens\":[\n  {\"name\":\"a\",}\n]}": `--tokens t.json: invalid JSON at line 2, column 15: invalid character '}'`,
		`{"tokens":[`:                            `--tokens t.json: invalid JSON: the file ends in the middle of a value`,
		``:                                       `--tokens t.json: the file is empty`,
		`{}`:                                     `--tokens t.json: "tokens" is missing; the file is {"tokens":[`,
		`{"tokens":null}`:                        `--tokens t.json: "tokens" is missing`,
		`{"tokens":[{"name":"","sha256":"` + digest("x") + `"}]}`:                                              `tokens[0]: name "" must be`,
		`{"tokens":[{"name":"a b","sha256":"` + digest("x") + `"}]}`:                                           `name "a b" must be`,
		`{"tokens":[{"name":"a","sha256":"abc"}]}`:                                                             `tokens[0] ("a"): sha256 must be the 64 hex digits`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `","scope":"../etc"}]}`:                            `scope "../etc": must stay below the root`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `","scope":"a/./b"}]}`:                             `scope "a/./b": must be a clean path`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `","readOnly":true,"exec":true}]}`:                 `exec true with readOnly true`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `"},{"name":"a","sha256":"` + digest("y") + `"}]}`: `tokens[1] ("a"): name "a" is used twice`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `"},{"name":"b","sha256":"` + digest("x") + `"}]}`: `tokens[1] ("b"): sha256 is the same as an earlier entry's`,
		`{"tokens":[]} {}`: `more than one JSON value`,
		`{"tokens":[]}}`:   `more than one JSON value`,
		`[1]`:              `--tokens t.json: the file is a JSON array; it should be an object, {"tokens":[...]}`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `","scope":"a","scope":""}]}`:           `tokens[0] ("a"): key "scope" appears twice: JSON would keep only the last value`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `","readOnly":true,"READONLY":false}]}`: `tokens[0] ("a"): key "readOnly" appears twice (as "readOnly" and "READONLY"`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `"}],"tokens":[]}`:                      `--tokens t.json: key "tokens" appears twice: JSON would keep only the last value; give each key once at the top level`,
		"\ufeff{\"tokens\":[]}": `invalid JSON at line 1, column 1`,
		`{"tokens":[{"name":"a\u0000","sha256":"` + digest("x") + `"}]}`:              `name "a\x00" must be`,
		"{\"tokens\":[{\"name\":\"a\xff\",\"sha256\":\"" + digest("x") + "\"}]}":      `must be 1 to 64 letters`,
		`{"tokens":[{"name":"a","sha256":"` + digest("x") + `","scope":"a\u0000b"}]}`: `must not contain NUL`,
	}
	for in, want := range bad {
		_, err := ParseTokens("t.json", []byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTokens(%s) = %v; want an error containing %q", in, err, want)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseTokens(%s): the error is not one line: %q", in, err)
		}
	}
}

func ptr(s *TokenSet) *atomic.Pointer[TokenSet] {
	var p atomic.Pointer[TokenSet]
	p.Store(s)
	return &p
}

// TestIdentify: the daemon's token is Full; a file's token is its entry;
// the query parameter counts only where asked; a wrong or missing
// credential is refused once any token is required; the set can be
// swapped (reload) under a Token already handed out.
func TestIdentify(t *testing.T) {
	set, err := ParseTokens("t", []byte(`{"tokens":[{"name":"bob","sha256":"`+digest("b-tok")+`","scope":"b"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := ptr(set)
	tok := NewTokens("master", p)
	hdr := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	if id, ok := tok.Identify(hdr("Bearer master"), nil); !ok || id != Full {
		t.Errorf("master: %+v %v", id, ok)
	}
	if id, ok := tok.Identify(hdr("bearer  b-tok"), nil); !ok || id.Name != "bob" {
		t.Errorf("bob: %+v %v", id, ok)
	}
	if _, ok := tok.Identify(http.Header{}, url.Values{"token": {"b-tok"}}); !ok {
		t.Error("bob by query refused where the query is allowed")
	}
	if _, ok := tok.Identify(http.Header{}, nil); ok {
		t.Error("no credential accepted")
	}
	for _, h := range []string{"Bearer wrong", "Basic b-tok", "b-tok", "Bearer b-tok2"} {
		if _, ok := tok.Identify(hdr(h), nil); ok {
			t.Errorf("%q accepted", h)
		}
	}
	r, _ := http.NewRequest("GET", "/ssh?token=b-tok", nil)
	if tok.AllowsHeader(r) || !tok.AllowsHeaderOrQuery(r) {
		t.Error("AllowsHeader/AllowsHeaderOrQuery disagree with Identify on the query")
	}
	// Reload: bob is gone, the Token already handed out sees it.
	empty, _ := ParseTokens("t", []byte(`{"tokens":[]}`))
	p.Store(empty)
	if _, ok := tok.Identify(hdr("Bearer b-tok"), nil); ok {
		t.Error("a token removed by a reload is still accepted")
	}
	// A token file with no daemon token still requires one of its tokens.
	only := NewTokens("", p)
	if !only.Required() {
		t.Error("a token file alone does not require a token")
	}
	if (Token{}).Required() {
		t.Error("the zero Token requires one")
	}
}

func TestJoinScope(t *testing.T) {
	for _, c := range []struct{ scope, req, want string }{
		{"", "", ""}, {"", "x/y", "x/y"}, {"a", "", "a"}, {"a", "/b/", "a/b"}, {"a/b", "c", "a/b/c"},
	} {
		if got := JoinScope(Identity{Scope: c.scope}, c.req); got != c.want {
			t.Errorf("JoinScope(%q, %q) = %q; want %q", c.scope, c.req, got, c.want)
		}
	}
}

func TestLoadTokens(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.json")
	if _, err := LoadTokens(p); err == nil || !strings.Contains(err.Error(), "--tokens "+p) {
		t.Errorf("missing file: %v", err)
	}
	os.WriteFile(p, []byte(strings.Repeat(" ", maxTokenFile+1)), 0o600)
	if _, err := LoadTokens(p); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("huge file: %v", err)
	}
}

// FuzzParseTokens: an error names the file; a file taken is one JSON value
// (nothing after it); no identity's scope leaves the root or is absolute,
// and no read-only one may exec.
func FuzzParseTokens(f *testing.F) {
	f.Add([]byte(`{"tokens":[{"name":"a","sha256":"` + digest("x") + `","scope":"s"}]}`))
	f.Add([]byte(`{"tokens":[{"name":"a","sha256":"` + digest("x") + `","scope":"../x","readOnly":true}]}`))
	f.Add([]byte(`{"tokens":[]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := ParseTokens("f", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--tokens f: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if !json.Valid(b) {
			t.Fatalf("took %q, which is not one JSON value", b)
		}
		for _, id := range set.bySum {
			if strings.Contains(id.Scope, "..") && strings.Contains("/"+id.Scope+"/", "/../") {
				t.Fatalf("scope %q leaves the root", id.Scope)
			}
			if id.ReadOnly && id.Exec {
				t.Fatalf("read-only token %q may exec", id.Name)
			}
			if strings.HasPrefix(id.Scope, "/") {
				t.Fatalf("scope %q is absolute", id.Scope)
			}
		}
	})
}

// TestLoadTokensRefusesUnsafeFiles: the token file grants rights, so
// LoadTokens (at start and on every SIGHUP) refuses a FIFO (a plain open
// waits for a writer: the start or the reload would hang), a directory,
// a file its group or others may write and one in a directory others may
// write, as sshd's StrictModes refuses such an authorized_keys.
func TestLoadTokensRefusesUnsafeFiles(t *testing.T) {
	dir := t.TempDir()
	body := []byte(`{"tokens":[{"name":"a","sha256":"` + digest("x") + `"}]}`)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ww := filepath.Join(dir, "ww.json")
	os.WriteFile(ww, body, 0o600)
	os.Chmod(ww, 0o646)
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o770)
	if os.Geteuid() == 0 {
		// A group other than root's (nogroup): internal/opfile allows
		// group write by root's group, whose members are root's.
		os.Chown(open, 0, 65534)
	} else {
		// The user's own group may be a private one, which the rule
		// allows: others write it instead.
		os.Chmod(open, 0o777)
	}
	inOpen := filepath.Join(open, "tokens.json")
	os.WriteFile(inOpen, body, 0o600)
	link := filepath.Join(dir, "link.json")
	os.Symlink(inOpen, link)
	for p, want := range map[string]string{
		fifo:   "not a regular file (a FIFO)",
		dir:    "not a regular file (a directory)",
		ww:     "writable by its group or by others",
		inOpen: "which its group or others may write",
		link:   "which its group or others may write",
	} {
		done := make(chan error, 1)
		go func() { _, err := LoadTokens(p); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "--tokens "+p+": ") || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err = %v, want %q", p, err, want)
			}
		case <-time.After(20 * time.Second):
			// Not a timing assertion: an open that waits on the FIFO
			// never returns.
			t.Fatalf("%s: LoadTokens is still opening the file", p)
		}
	}
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, body, 0o644)
	if set, err := LoadTokens(good); err != nil || set.Len() != 1 {
		t.Fatalf("good file: %v", err)
	}
}

// TestParseTokensCRLF: a file written on Windows (CRLF line ends) reads
// as the same file with LF.
func TestParseTokensCRLF(t *testing.T) {
	in := "{\"tokens\":[\r\n  {\"name\":\"a\",\"sha256\":\"" + digest("x") + "\",\"scope\":\"s\"}\r\n]}\r\n"
	set, err := ParseTokens("t.json", []byte(in))
	if err != nil || set.Len() != 1 {
		t.Fatalf("CRLF file: %v", err)
	}
}

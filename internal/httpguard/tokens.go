package httpguard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"sync/atomic"
)

// Identity is who a request authenticated as: the daemon's own token
// (--auth-token: Name "", every scope, read-write, exec), or an entry of
// the token file (--tokens). internal/admit derives it from the request's
// credential, once per request (Token.IdentifyRequest), for every face, so
// it cannot be claimed any other way.
type Identity struct {
	// Name is the token file entry's name ("" for the daemon's token or
	// no token): what the audit log and the logs say.
	Name string
	// Scope is the directory, relative to the root, the token is bound
	// to; "" is the whole root. A request's X-Scope-Path narrows it.
	Scope string
	// ReadOnly tokens may only call tools that change nothing (their
	// annotations say readOnlyHint) and, over SSH, read.
	ReadOnly bool
	// Exec says the token may run commands (exec, shells, process tools,
	// system.run, sites' commands).
	Exec bool
}

// Full is the identity of the daemon's own token, and of a daemon without
// one: everything.
var Full = Identity{Exec: true}

// TokenSet is a parsed token file. It is immutable; a reload builds a new
// one and swaps the pointer the daemon's Tokens share.
type TokenSet struct {
	bySum map[[32]byte]Identity
	names []string
}

// Len is how many tokens the set holds.
func (s *TokenSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.bySum)
}

// tokenFile is the file's JSON shape.
type tokenFile struct {
	Tokens []tokenEntry `json:"tokens"`
}

type tokenEntry struct {
	Name     string `json:"name"`
	SHA256   string `json:"sha256"`
	Scope    string `json:"scope"`
	ReadOnly bool   `json:"readOnly"`
	Exec     *bool  `json:"exec"`
}

var tokenName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// maxTokenFile bounds the token file (a line per token is ~150 bytes).
const maxTokenFile = 4 << 20

// LoadTokens reads and parses the token file at p.
func LoadTokens(p string) (*TokenSet, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("--tokens %s: %v", p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, fmt.Errorf("--tokens %s: %v", p, err)
	}
	if len(b) > maxTokenFile {
		return nil, fmt.Errorf("--tokens %s: larger than %d bytes", p, maxTokenFile)
	}
	return ParseTokens(p, b)
}

// ParseTokens parses a token file's content (name is the file, for the
// errors). The file is JSON:
//
//	{"tokens": [
//	  {"name": "alice", "sha256": "<hex SHA-256 of the token>", "scope": "users/alice"},
//	  {"name": "ci", "sha256": "…", "scope": "", "readOnly": true}
//	]}
//
// It holds digests, never tokens. name ([A-Za-z0-9._-], at most 64) and
// sha256 are required and unique; scope is a path below the root ("" or
// "/" for the whole root; no ".."); readOnly defaults to false; exec
// defaults to true for a read-write token and may not be true for a
// read-only one (a command can write). Unknown keys are refused, so a
// misspelt "read_only" cannot leave a token read-write (names match
// without regard to case, as encoding/json does). Every error names
// the file, the entry and the key.
func ParseTokens(name string, data []byte) (*TokenSet, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var tf tokenFile
	if err := dec.Decode(&tf); err != nil {
		return nil, fmt.Errorf("--tokens %s: %v", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("--tokens %s: more than one JSON value", name)
	}
	set := &TokenSet{bySum: make(map[[32]byte]Identity, len(tf.Tokens))}
	seen := map[string]bool{}
	for i, e := range tf.Tokens {
		where := fmt.Sprintf("--tokens %s: tokens[%d]", name, i)
		if e.Name != "" {
			where += fmt.Sprintf(" (%q)", e.Name)
		}
		if !tokenName.MatchString(e.Name) {
			return nil, fmt.Errorf("%s: name %q must be 1 to 64 letters, digits, '.', '_' or '-'", where, e.Name)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("%s: name %q is used twice", where, e.Name)
		}
		seen[e.Name] = true
		raw, err := hex.DecodeString(e.SHA256)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("%s: sha256 must be the 64 hex digits of the token's SHA-256 (printf %%s \"$TOKEN\" | sha256sum)", where)
		}
		var sum [32]byte
		copy(sum[:], raw)
		if _, dup := set.bySum[sum]; dup {
			return nil, fmt.Errorf("%s: sha256 is the same as an earlier entry's: one token, one entry", where)
		}
		scope, err := cleanScope(e.Scope)
		if err != nil {
			return nil, fmt.Errorf("%s: scope %q: %v", where, e.Scope, err)
		}
		exec := !e.ReadOnly
		if e.Exec != nil {
			if *e.Exec && e.ReadOnly {
				return nil, fmt.Errorf("%s: exec true with readOnly true: a command can write, so a read-only token cannot run commands", where)
			}
			exec = *e.Exec
		}
		set.bySum[sum] = Identity{Name: e.Name, Scope: scope, ReadOnly: e.ReadOnly, Exec: exec}
		set.names = append(set.names, e.Name)
	}
	return set, nil
}

// cleanScope is a token's scope as a clean relative path: no "..", no
// empty or "." components, no NUL; "" for the root.
func cleanScope(s string) (string, error) {
	s = strings.Trim(s, "/")
	if s == "" {
		return "", nil
	}
	for _, part := range strings.Split(s, "/") {
		switch part {
		case "", ".":
			return "", errors.New("must be a clean path (no empty or \".\" parts)")
		case "..":
			return "", errors.New("must stay below the root (no \"..\")")
		}
	}
	if strings.ContainsRune(s, 0) {
		return "", errors.New("must not contain NUL")
	}
	return s, nil
}

// NewTokens is NewToken with a token file besides the daemon's own token:
// a request may carry either. set is shared with the daemon, which swaps
// it on reload (SIGHUP); a nil pointer or nil set adds nothing.
func NewTokens(token string, set *atomic.Pointer[TokenSet]) Token {
	t := NewToken(token)
	t.tokens = set
	return t
}

// Identify returns who the credential of a request with header h (and,
// when q is not nil, its "token" query parameter) belongs to. ok is false
// when a token is required and none matches. Without any token required
// it is Full.
func (t Token) Identify(h http.Header, q url.Values) (Identity, bool) {
	if id, ok := t.fromHeader(h); ok || q == nil {
		return id, ok
	}
	return t.fromQuery(q)
}

// IdentifyRequest is Identify on r's header and, with query, on its
// "token" parameter, which is parsed only when the header carries no
// token that matches.
func (t Token) IdentifyRequest(r *http.Request, query bool) (Identity, bool) {
	if id, ok := t.fromHeader(r.Header); ok || !query {
		return id, ok
	}
	return t.fromQuery(r.URL.Query())
}

// fromHeader is who h's Authorization header names; Full when no token
// is required.
func (t Token) fromHeader(h http.Header) (Identity, bool) {
	if !t.Required() {
		return Full, true
	}
	if got, ok := bearerCredentials(h.Get("Authorization")); ok {
		return t.identify(got)
	}
	return Identity{}, false
}

// fromQuery is who q's "token" parameter names.
func (t Token) fromQuery(q url.Values) (Identity, bool) {
	if got := q.Get("token"); got != "" {
		return t.identify(got)
	}
	return Identity{}, false
}

func (t Token) identify(got string) (Identity, bool) {
	if t.set && t.matches(got) {
		return Full, true
	}
	if t.tokens == nil {
		return Identity{}, false
	}
	set := t.tokens.Load()
	if set == nil {
		return Identity{}, false
	}
	// A map keyed by the candidate's digest: its timing says something
	// about the digest only, from which nothing about a token follows.
	id, ok := set.bySum[sha256.Sum256([]byte(got))]
	return id, ok
}

// JoinScope is the scope a request works in: its identity's scope, then
// the request's X-Scope-Path (already normalized: no "..") below it. A
// bound token can narrow its scope, never leave it.
func JoinScope(id Identity, requested string) string {
	requested = strings.Trim(requested, "/")
	switch {
	case id.Scope == "":
		return requested
	case requested == "":
		return id.Scope
	}
	return path.Join(id.Scope, requested)
}

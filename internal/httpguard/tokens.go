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
	"path"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/agentbe/agentbe-daemon/internal/jsonscan"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/internal/suggest"
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

// NameOf is the name of the entry whose token has the digest sum, and
// whether there is one.
func (s *TokenSet) NameOf(sum [32]byte) (string, bool) {
	if s == nil {
		return "", false
	}
	id, ok := s.bySum[sum]
	return id.Name, ok
}

// Each calls f with the name and the token's digest of each entry, in no
// particular order.
func (s *TokenSet) Each(f func(name string, sum [32]byte)) {
	if s == nil {
		return
	}
	for sum, id := range s.bySum {
		f(id.Name, sum)
	}
}

// tokenFile is the file's JSON shape; each entry is decoded on its own, so
// an error can name it.
type tokenFile struct {
	Tokens *[]json.RawMessage `json:"tokens"`
}

// tokenKeys are an entry's keys, for "did you mean" and "the keys are".
var tokenKeys = []string{"name", "sha256", "scope", "readOnly", "exec"}

type tokenEntry struct {
	Name     string `json:"name"`
	SHA256   string `json:"sha256"`
	Scope    string `json:"scope"`
	ReadOnly bool   `json:"readOnly"`
	Exec     *bool  `json:"exec"`
}

// validTokenName reports whether name is 1 to 64 letters, digits, '.', '_'
// or '-'. A loop, not a regexp: a package-level `{1,64}` pattern compiles to
// 64 copies of its class, 60 KB and 0.4 ms of every daemon start
// (GODEBUG=inittrace=1), with or without a token file.
func validTokenName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// maxTokenFile bounds the token file (a line per token is ~150 bytes).
const maxTokenFile = 4 << 20

// LoadTokens reads and parses the token file at p, at start and on every
// reload: internal/opfile's reader, which refuses a FIFO, a device, a
// directory, a file over maxTokenFile and one that a user other than its
// owner could change.
func LoadTokens(p string) (*TokenSet, error) {
	b, err := opfile.Read(p, maxTokenFile)
	if err != nil {
		return nil, fmt.Errorf("--tokens %s: %v", p, err)
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
// the file, the entry and the key; a key given twice in an object (in any
// case) is refused too, since JSON keeps only the last. For example
//
//	--tokens /etc/agentbe/tokens.json: tokens[1] ("ci"): unknown key "scop"; did you mean "scope"?
func ParseTokens(name string, data []byte) (*TokenSet, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var tf tokenFile
	if err := dec.Decode(&tf); err != nil {
		return nil, fmt.Errorf("--tokens %s: %s", name, fileMsg(data, err))
	}
	// Token, not More: More is false before a stray '}' or ']'.
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("--tokens %s: more than one JSON value", name)
	}
	if k, other := repeatedKey(data); k != "" {
		return nil, fmt.Errorf("--tokens %s: %s at the top level", name, repeatedMsg(k, other))
	}
	if tf.Tokens == nil {
		// {} or {"tokens": null}: most likely a file meant for something
		// else, and a daemon that admits no token is no use.
		return nil, fmt.Errorf(`--tokens %s: "tokens" is missing; the file is {"tokens":[{"name":...,"sha256":...}, ...]} (an empty array admits no token)`, name)
	}
	set := &TokenSet{bySum: make(map[[32]byte]Identity, len(*tf.Tokens))}
	seen := map[string]bool{}
	for i, raw := range *tf.Tokens {
		var e tokenEntry
		ed := json.NewDecoder(bytes.NewReader(raw))
		ed.DisallowUnknownFields()
		err := ed.Decode(&e)
		var probe struct {
			Name any `json:"name"`
		}
		_ = json.Unmarshal(raw, &probe)
		where := fmt.Sprintf("--tokens %s: tokens[%d]", name, i)
		if n, ok := probe.Name.(string); ok && n != "" {
			where += fmt.Sprintf(" (%q)", n)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s", where, entryMsg(err))
		}
		if k, other := repeatedKey(raw); k != "" {
			return nil, fmt.Errorf("%s: %s", where, repeatedMsg(k, other))
		}
		if !validTokenName(e.Name) {
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

// repeatedKey is a key that the JSON object data holds twice, and its
// other spelling, or "". encoding/json keeps the last of two values and
// matches keys without regard to case, so {"scope":"a","Scope":""} would
// quietly bind the token to the whole root: a file whose reader cannot
// tell which value is in force is refused. data is known to be valid JSON.
func repeatedKey(data []byte) (k, other string) {
	var seen []string
	jsonscan.Keys(data, func(key string, _ []byte) bool {
		for _, s := range seen {
			if strings.EqualFold(s, key) {
				k, other = key, s
				return false
			}
		}
		seen = append(seen, key)
		return true
	})
	return k, other
}

func repeatedMsg(k, other string) string {
	if k == other {
		return fmt.Sprintf("key %q appears twice: JSON would keep only the last value; give each key once", k)
	}
	return fmt.Sprintf("key %q appears twice (as %q and %q; keys match without regard to case): JSON would keep only the last value; give each key once", other, other, k)
}

// fileMsg words an error decoding the file's top level: where the JSON
// breaks, an unknown key (and the one meant), a value of the wrong type.
func fileMsg(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := min(se.Offset, int64(len(data)))
		if off > 0 {
			off-- // the offset counts the bad byte
		}
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		col := int(off) - bytes.LastIndexByte(data[:off], '\n')
		return fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, se)
	}
	if errors.Is(err, io.EOF) {
		return `the file is empty; it should be {"tokens":[{"name":...,"sha256":...}, ...]}`
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "invalid JSON: the file ends in the middle of a value"
	}
	if k, ok := unknownField(err); ok {
		msg := fmt.Sprintf("unknown key %q at the top level", k)
		if s := suggest.Closest(k, []string{"tokens"}); s != "" {
			return msg + fmt.Sprintf("; did you mean %q?", s)
		}
		return msg + `; the file is {"tokens":[...]}`
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Sprintf(`the file is a JSON %s; it should be an object, {"tokens":[...]}`, te.Value)
		}
		return fmt.Sprintf(`%q must be an array of entries, not a JSON %s`, te.Field, te.Value)
	}
	return err.Error()
}

// entryMsg words an error decoding one entry, naming the key.
func entryMsg(err error) string {
	if k, ok := unknownField(err); ok {
		if s := suggest.Closest(k, tokenKeys); s != "" {
			return fmt.Sprintf("unknown key %q; did you mean %q?", k, s)
		}
		return fmt.Sprintf("unknown key %q; the keys are %s", k, strings.Join(tokenKeys, ", "))
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Sprintf(`must be an object such as {"name":...,"sha256":...}, not a JSON %s`, te.Value)
		}
		want := "a string"
		switch te.Field {
		case "readOnly", "exec":
			want = "true or false"
		}
		return fmt.Sprintf("%q must be %s, not a JSON %s", te.Field, want, te.Value)
	}
	return err.Error()
}

// unknownField is the key of encoding/json's "unknown field" error, which
// has no type of its own.
func unknownField(err error) (string, bool) {
	f, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	k, uerr := strconv.Unquote(f)
	if uerr != nil {
		k = strings.Trim(f, `"`)
	}
	return k, true
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

// HasSet reports whether t admits the tokens of a token file (--tokens)
// besides the daemon's own.
func (t Token) HasSet() bool { return t.tokens != nil }

// Identify returns who the credential of a request with header h (and,
// when q is not nil, its "token" query parameter) belongs to. ok is false
// when a token is required and none matches. Without any token required
// it is Full.
func (t Token) Identify(h http.Header, q url.Values) (Identity, bool) {
	if id, _, ok := t.fromHeader(h); ok || q == nil {
		return id, ok
	}
	id, _, ok := t.fromQuery(q)
	return id, ok
}

// IdentifyRequest is Identify on r's header and, with query, on its
// "token" parameter, which is parsed only when the header carries no
// token that matches.
func (t Token) IdentifyRequest(r *http.Request, query bool) (Identity, bool) {
	id, _, ok := t.IdentifyCredential(r, query)
	return id, ok
}

// Credential is the digest of the token a request was admitted with, never
// the token: what lets internal/admit judge something the request opened
// (a WebSocket connection, an MCP stream) again with the token set in
// force after a reload (Token.Reidentify). The zero Credential is a
// request that brought no token, to a daemon that requires none.
type Credential struct {
	sum [32]byte
	set bool
}

// IdentifyCredential is IdentifyRequest, and the Credential the identity
// was found by.
func (t Token) IdentifyCredential(r *http.Request, query bool) (Identity, Credential, bool) {
	if id, c, ok := t.fromHeader(r.Header); ok || !query {
		return id, c, ok
	}
	return t.fromQuery(r.URL.Query())
}

// Reidentify is who c names with the token set in force now: the identity
// Identify gives a request that brings c's token today. ok is false when
// no token in force matches it (a reload removed it). Without any token
// required it is Full.
func (t Token) Reidentify(c Credential) (Identity, bool) {
	if !t.Required() {
		return Full, true
	}
	if !c.set {
		return Identity{}, false
	}
	return t.identifySum(c.sum)
}

// fromHeader is who h's Authorization header names; Full when no token
// is required.
func (t Token) fromHeader(h http.Header) (Identity, Credential, bool) {
	if !t.Required() {
		return Full, Credential{}, true
	}
	if got, ok := bearerCredentials(h.Get("Authorization")); ok {
		return t.identify(got)
	}
	return Identity{}, Credential{}, false
}

// fromQuery is who q's "token" parameter names.
func (t Token) fromQuery(q url.Values) (Identity, Credential, bool) {
	if got := q.Get("token"); got != "" {
		return t.identify(got)
	}
	return Identity{}, Credential{}, false
}

func (t Token) identify(got string) (Identity, Credential, bool) {
	c := Credential{sum: sha256.Sum256([]byte(got)), set: true}
	id, ok := t.identifySum(c.sum)
	if !ok {
		return Identity{}, Credential{}, false
	}
	return id, c, true
}

// identifySum is who the token with digest sum is.
func (t Token) identifySum(sum [32]byte) (Identity, bool) {
	if t.own != nil && t.matches(sum) {
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
	id, ok := set.bySum[sum]
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

package httpguard

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
)

// Token is the daemon's bearer-token rule, the one check every endpoint
// makes (through internal/admit) before any work. A request carries the
// token when either
//
//   - its Authorization header is the scheme "Bearer" in any case (auth
//     schemes are case-insensitive, RFC 7235 §2.1), one or more spaces or
//     tabs, and the token byte for byte (spaces and tabs around the whole
//     value are not part of it: net/http strips them, and so does Token);
//   - or, where the endpoint allows it (/ssh and /gateway: a browser's
//     WebSocket API cannot set headers), its query has token=<token>,
//     URL-decoded.
//
// Anything else is refused: another scheme, the bare token, the token with
// more or less around it, an empty value. The candidate and the token are
// compared as SHA-256 digests with crypto/subtle, so neither the token's
// content nor its length shows in the time a refusal takes.
//
// The zero Token requires nothing. A Token is safe for concurrent use.
// Copies share the token: Rotate on one changes what every copy admits.
type Token struct {
	// own is the sha256 of the token, swapped by Rotate; nil for the
	// zero Token.
	own *atomic.Pointer[[32]byte]
	// tokens is the token file's set (tokens.go), shared with the daemon,
	// which swaps it on reload; nil without --tokens.
	tokens *atomic.Pointer[TokenSet]
}

// NewToken returns the rule for token; "" requires nothing.
func NewToken(token string) Token {
	if token == "" {
		return Token{}
	}
	sum := sha256.Sum256([]byte(token))
	t := Token{own: new(atomic.Pointer[[32]byte])}
	t.own.Store(&sum)
	return t
}

// Rotate puts token in the place of the one t was made with, for t and
// every copy of it: requests that bring the old token are refused from
// now on (the daemon's reload of --auth-token-file, --operator-token-file
// and --metrics-token-file). It refuses "" and a Token made without one:
// a reload cannot turn authentication on or off.
func (t Token) Rotate(token string) error {
	if t.own == nil {
		return errors.New("httpguard: Rotate of a Token that requires no token")
	}
	if token == "" {
		return errors.New("httpguard: Rotate to an empty token")
	}
	sum := sha256.Sum256([]byte(token))
	t.own.Store(&sum)
	return nil
}

// Required reports whether requests must carry a token: the daemon's, or
// (with a token file) one of the file's.
func (t Token) Required() bool { return t.own != nil || t.tokens != nil }

// AllowsHeader reports whether r may proceed on its Authorization header.
func (t Token) AllowsHeader(r *http.Request) bool {
	_, ok := t.Identify(r.Header, nil)
	return ok
}

// AllowsHeaderOrQuery reports whether r may proceed on its Authorization
// header or, failing that, its "token" query parameter.
func (t Token) AllowsHeaderOrQuery(r *http.Request) bool {
	_, ok := t.IdentifyRequest(r, true)
	return ok
}

// matches compares a candidate's digest with the token's in constant
// time: on fixed-length digests, since subtle.ConstantTimeCompare returns
// at once on a length mismatch.
func (t Token) matches(sum [32]byte) bool {
	own := t.own.Load()
	return subtle.ConstantTimeCompare(sum[:], own[:]) == 1
}

// bearerCredentials returns the credentials of an Authorization header value
// using the Bearer scheme (any case), and false for any other value.
func bearerCredentials(h string) (string, bool) {
	h = strings.Trim(h, " \t")
	const scheme = "Bearer"
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	rest := h[len(scheme):]
	cred := strings.TrimLeft(rest, " \t")
	if len(cred) == len(rest) || cred == "" {
		return "", false // "BearerX…" is another scheme; "Bearer" alone has nothing
	}
	return cred, true
}

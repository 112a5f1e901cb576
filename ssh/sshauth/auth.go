package sshauth

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/admit"
)

// Defaults.
const (
	// DefaultMaxAuthTries is how many authentication attempts a connection
	// gets before it is cut (OpenSSH's MaxAuthTries).
	DefaultMaxAuthTries = 6
	// failureDelay is the delay after one failed attempt from an address;
	// it doubles with each further failure, up to maxFailureDelay, and the
	// count is forgotten after failureMemory without one.
	failureDelay    = 250 * time.Millisecond
	maxFailureDelay = 8 * time.Second
	failureMemory   = 10 * time.Minute
	maxTrackedAddrs = 10000
)

// DefaultCertPrincipals are the login names a certificate may log in as
// when Options.CertPrincipals is empty: the clients' and the docs' user.
var DefaultCertPrincipals = []string{"agent"}

// Options configure an Auth.
type Options struct {
	// AuthorizedKeys is an OpenSSH authorized_keys file; "" accepts no key.
	AuthorizedKeys string
	// PasswordHashFile holds one bcrypt hash ("$2a$..."); "" accepts no
	// password.
	PasswordHashFile string
	// TrustedUserCAKeys is OpenSSH's TrustedUserCAKeys file: user
	// certificates signed by one of its keys are accepted (checkCert);
	// "" accepts no certificate.
	TrustedUserCAKeys string
	// CertPrincipals are the login names a certificate may log in as
	// (--ssh-cert-principals); the certificate must name the login name
	// among its principals too. Empty: DefaultCertPrincipals.
	CertPrincipals []string
	Logger         *slog.Logger
	// Attempt, when set, is told of every attempt (metrics).
	Attempt func(method, outcome string)
	// Changed, when set, is called after a reload (Reload, or a file
	// noticed changed at a login or by Health) has put new contents in
	// force, outside the reload's lock: the SSH core judges its open
	// connections again then (Recheck).
	Changed func()
	// sleep is time.Sleep (tests replace it).
	sleep func(time.Duration)
}

// Auth is the SSH port's authentication. It is safe for concurrent use.
type Auth struct {
	opts       Options
	log        *slog.Logger
	principals map[string]bool // Options.CertPrincipals

	// reloadMu makes reloads one at a time; mu guards what they set.
	reloadMu sync.Mutex
	mu       sync.Mutex
	keys     []Key
	cas      []gossh.PublicKey
	hash     []byte
	// The configured files, in the order keys, CAs, password.
	sources []*source

	fmu      sync.Mutex
	failures map[netip.Addr]*failure
}

type failure struct {
	n    int
	last time.Time
}

// New loads the files. Without either, every login is refused, and New says
// so: the SSH port has no unauthenticated mode. A file that does not load
// fails New (the daemon does not start).
func New(opts Options) (*Auth, error) {
	if opts.AuthorizedKeys == "" && opts.PasswordHashFile == "" && opts.TrustedUserCAKeys == "" {
		return nil, errors.New("no authentication configured: set --ssh-authorized-keys (and/or --ssh-trusted-user-ca-keys, --ssh-password-hash-file); the SSH port has no unauthenticated mode")
	}
	if opts.sleep == nil {
		opts.sleep = time.Sleep
	}
	a := &Auth{opts: opts, log: opts.Logger, failures: map[netip.Addr]*failure{}, principals: map[string]bool{}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	names := opts.CertPrincipals
	if len(names) == 0 {
		names = DefaultCertPrincipals
	}
	for _, p := range names {
		if p == "" || strings.ContainsAny(p, ", \t\r\n") {
			return nil, fmt.Errorf("--ssh-cert-principals: %q is not a login name (no empty names, commas or spaces)", p)
		}
		a.principals[p] = true
	}
	for _, f := range []struct{ flag, name string }{
		{"--ssh-authorized-keys", opts.AuthorizedKeys},
		{"--ssh-trusted-user-ca-keys", opts.TrustedUserCAKeys},
		{"--ssh-password-hash-file", opts.PasswordHashFile},
	} {
		if f.name != "" {
			a.sources = append(a.sources, &source{flag: f.flag, name: f.name})
		}
	}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Reload reads every file again (SIGHUP). It fails closed, file by file: a
// file that cannot be read or parsed (missing, not a regular file, a line
// that does not parse or an option that is not supported, a CA file with
// no key, a hash that is not bcrypt) admits nothing until a version that
// loads replaces it; the other files are unaffected. Each such file is
// logged at error level and reported by Health; the error returned joins
// them.
func (a *Auth) Reload() error {
	a.reloadMu.Lock()
	err := a.load(true)
	a.reloadMu.Unlock()
	a.changed()
	return err
}

// changed tells Options.Changed that the files were read again.
func (a *Auth) changed() {
	if a.opts.Changed != nil {
		a.opts.Changed()
	}
}

// refresh reloads the files that changed since they were last read (or
// stopped or started failing to open), so a key added or revoked applies
// to the next login without a restart.
func (a *Auth) refresh() {
	a.mu.Lock()
	sigs := make([]fileSig, len(a.sources))
	for i, src := range a.sources {
		sigs[i] = src.sig
	}
	a.mu.Unlock()
	stale := false
	for i, src := range a.sources {
		stale = stale || statSig(src.name) != sigs[i]
	}
	if !stale {
		return
	}
	a.reloadMu.Lock()
	_ = a.load(false)
	a.reloadMu.Unlock()
	a.changed()
}

// load reads the files (all of them, or those whose signature changed) and
// puts what they give in force. Called with reloadMu held.
func (a *Auth) load(all bool) error {
	var errs []error
	for _, src := range a.sources {
		// Only load writes src (with reloadMu held): reading it needs no mu.
		if !all && statSig(src.name) == src.sig {
			continue
		}
		first := src.read.IsZero()
		data, sig, err := readFile(src.name)
		var keys []Key
		var cas []gossh.PublicKey
		var hash []byte
		n := 0
		if err == nil {
			switch src.flag {
			case "--ssh-authorized-keys":
				keys, err = ParseAuthorizedKeys(src.name, data)
				n = len(keys)
			case "--ssh-trusted-user-ca-keys":
				cas, err = ParseTrustedUserCAKeys(src.name, data)
				n = len(cas)
			default:
				hash = bytes.TrimSpace(data)
				if _, herr := bcrypt.Cost(hash); herr != nil {
					err = fmt.Errorf("%s %s: not a bcrypt hash (make one with: htpasswd -nbBC 12 '' 'PASSWORD' | cut -d: -f2): %v", src.flag, src.name, herr)
				}
				n = 1
			}
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), src.flag) {
				err = fmt.Errorf("%s: %w", src.flag, err)
			}
			keys, cas, hash, n = nil, nil, nil, 0
			errs = append(errs, err)
		}
		a.mu.Lock()
		wasErr := src.err != nil
		src.sig, src.n, src.err, src.read = sig, n, err, time.Now()
		switch src.flag {
		case "--ssh-authorized-keys":
			a.keys = keys
		case "--ssh-trusted-user-ca-keys":
			a.cas = cas
		default:
			a.hash = hash
		}
		a.mu.Unlock()
		switch {
		case first:
			// New's caller reports the start.
		case err != nil:
			a.log.Error("ssh: a file of the SSH port's authentication cannot be loaded; nothing it vouched for is admitted until it loads again", "flag", src.flag, "file", src.name, "err", err)
		case wasErr:
			a.log.Info("ssh: the file loads again", "flag", src.flag, "file", src.name, "entries", n)
		default:
			a.log.Info("ssh: file reloaded", "flag", src.flag, "file", src.name, "entries", n)
		}
	}
	return errors.Join(errs...)
}

// Health reports the files' state, after reloading those that changed.
func (a *Auth) Health() Health {
	a.refresh()
	a.mu.Lock()
	defer a.mu.Unlock()
	var h Health
	var errs []string
	for _, src := range a.sources {
		fh := FileHealth{Flag: src.flag, File: src.name, Loaded: src.n, ReadAt: src.read}
		if src.err != nil {
			fh.Error = src.err.Error()
			errs = append(errs, fh.Error)
		}
		h.Files = append(h.Files, fh)
	}
	h.Error = strings.Join(errs, "; ")
	return h
}

// PublicKey is the sshd PublicKeyCallback. x/crypto calls it when a
// client offers a key, before the client has proved it holds the private
// key (a "query" needs no signature, and public keys are public): a key
// it admits is only a candidate, so nothing is logged as accepted and the
// address's failures are not forgotten here, but in VerifiedPublicKey,
// once the signature has been checked. A refusal is a failure at once.
func (a *Auth) PublicKey(conn gossh.ConnMetadata, key gossh.PublicKey) (*gossh.Permissions, error) {
	a.refresh()
	addr := admit.ClientAddr(conn.RemoteAddr())
	fp := gossh.FingerprintSHA256(key)
	a.mu.Lock()
	keys, cas := a.keys, a.cas
	a.mu.Unlock()
	if cert, ok := key.(*gossh.Certificate); ok {
		fp = certFingerprint(cert)
		perms, err := checkCert(conn, cert, cas, a.principals)
		if err != nil {
			a.failed(conn, "publickey", fp, err.Error())
			return nil, err
		}
		return perms, nil
	}
	for i := range keys {
		k := &keys[i]
		if !bytes.Equal(k.Key.Marshal(), key.Marshal()) {
			continue
		}
		if !k.allows(addr) {
			a.failed(conn, "publickey", fp, "from= does not admit this address")
			return nil, errors.New("key not allowed from this address")
		}
		return k.permissions(), nil
	}
	a.failed(conn, "publickey", fp, "unknown key")
	return nil, errors.New("unknown key")
}

// VerifiedPublicKey is the sshd VerifiedPublicKeyCallback: x/crypto calls
// it after the client signed with a key PublicKey admitted. Only then is
// the login accepted: logged, counted, and the address's failures
// forgotten.
func (a *Auth) VerifiedPublicKey(conn gossh.ConnMetadata, key gossh.PublicKey, perms *gossh.Permissions, _ string) (*gossh.Permissions, error) {
	fp := gossh.FingerprintSHA256(key)
	if cert, ok := key.(*gossh.Certificate); ok {
		fp = certFingerprint(cert)
	}
	a.succeeded(conn, "publickey", fp)
	var ext map[string]string
	if perms != nil {
		ext = maps.Clone(perms.Extensions)
	}
	return remember(perms, &login{key: key, ext: ext}), nil
}

func certFingerprint(cert *gossh.Certificate) string {
	return gossh.FingerprintSHA256(cert.Key) + " cert " + fmt.Sprintf("%q serial %d", cert.KeyId, cert.Serial)
}

// Password is the sshd PasswordCallback: bcrypt's comparison, which takes
// the same time whatever the password.
func (a *Auth) Password(conn gossh.ConnMetadata, password []byte) (*gossh.Permissions, error) {
	a.refresh()
	a.mu.Lock()
	hash := a.hash
	a.mu.Unlock()
	if hash == nil {
		a.failed(conn, "password", "", "passwords are not accepted")
		return nil, errors.New("passwords are not accepted")
	}
	if bcrypt.CompareHashAndPassword(hash, password) != nil {
		a.failed(conn, "password", "", "wrong password")
		return nil, errors.New("wrong password")
	}
	a.succeeded(conn, "password", "")
	return remember(&gossh.Permissions{Extensions: map[string]string{"auth": "password"}}, &login{hash: hash}), nil
}

func (a *Auth) succeeded(conn gossh.ConnMetadata, method, fp string) {
	a.log.Info("ssh login", "user", conn.User(), "method", method, "key", fp, "remote", conn.RemoteAddr().String(), "outcome", "accepted")
	if a.opts.Attempt != nil {
		a.opts.Attempt(method, "accepted")
	}
	a.fmu.Lock()
	delete(a.failures, admit.ClientAddr(conn.RemoteAddr()))
	a.fmu.Unlock()
}

// failed logs and counts the attempt, then makes the next one from the
// same address wait: the delay doubles with each failure.
func (a *Auth) failed(conn gossh.ConnMetadata, method, fp, why string) {
	a.log.Warn("ssh login refused", "user", conn.User(), "method", method, "key", fp, "remote", conn.RemoteAddr().String(), "why", why)
	if a.opts.Attempt != nil {
		a.opts.Attempt(method, "refused")
	}
	addr := admit.ClientAddr(conn.RemoteAddr())
	now := time.Now()
	a.fmu.Lock()
	f := a.failures[addr]
	if f == nil || now.Sub(f.last) > failureMemory {
		if len(a.failures) >= maxTrackedAddrs {
			for k, v := range a.failures {
				if now.Sub(v.last) > failureMemory || len(a.failures) >= maxTrackedAddrs {
					delete(a.failures, k)
				}
			}
		}
		f = &failure{}
		a.failures[addr] = f
	}
	f.n++
	f.last = now
	n := f.n
	a.fmu.Unlock()
	d := failureDelay << min(n-1, 16)
	if d > maxFailureDelay {
		d = maxFailureDelay
	}
	a.opts.sleep(d)
}

// Describe says what is configured, for the start-up log.
func (a *Auth) Describe() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var parts []string
	if a.opts.AuthorizedKeys != "" {
		parts = append(parts, fmt.Sprintf("%d authorized keys", len(a.keys)))
	}
	if a.opts.TrustedUserCAKeys != "" {
		parts = append(parts, fmt.Sprintf("certificates of %d CA keys", len(a.cas)))
	}
	if a.hash != nil {
		parts = append(parts, "a password")
	}
	for _, src := range a.sources {
		if src.err != nil {
			parts = append(parts, "nothing from "+src.flag+" (it does not load)")
		}
	}
	return strings.Join(parts, " and ")
}

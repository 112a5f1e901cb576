package sshauth

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
	gossh "golang.org/x/crypto/ssh"
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
	Logger            *slog.Logger
	// Attempt, when set, is told of every attempt (metrics).
	Attempt func(method, outcome string)
	// sleep is time.Sleep (tests replace it).
	sleep func(time.Duration)
}

// Auth is the SSH port's authentication. It is safe for concurrent use.
type Auth struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	keys    []Key
	keysMod time.Time
	keysLen int64
	cas     []gossh.PublicKey
	casMod  time.Time
	casLen  int64
	hash    []byte

	fmu      sync.Mutex
	failures map[netip.Addr]*failure
}

type failure struct {
	n    int
	last time.Time
}

// New loads the files. Without either, every login is refused, and New says
// so: the SSH port has no unauthenticated mode.
func New(opts Options) (*Auth, error) {
	if opts.AuthorizedKeys == "" && opts.PasswordHashFile == "" && opts.TrustedUserCAKeys == "" {
		return nil, errors.New("no authentication configured: set --ssh-authorized-keys (and/or --ssh-trusted-user-ca-keys, --ssh-password-hash-file); the SSH port has no unauthenticated mode")
	}
	if opts.sleep == nil {
		opts.sleep = time.Sleep
	}
	a := &Auth{opts: opts, log: opts.Logger, failures: map[netip.Addr]*failure{}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Reload reads the files again (SIGHUP). On an error the previous keys and
// hash stay in force.
func (a *Auth) Reload() error {
	var keys []Key
	var mod time.Time
	var size int64
	if a.opts.AuthorizedKeys != "" {
		fi, err := os.Stat(a.opts.AuthorizedKeys)
		if err != nil {
			return fmt.Errorf("--ssh-authorized-keys: %w", err)
		}
		if keys, err = readKeys(a.opts.AuthorizedKeys); err != nil {
			return fmt.Errorf("--ssh-authorized-keys: %w", err)
		}
		mod, size = fi.ModTime(), fi.Size()
	}
	var cas []gossh.PublicKey
	var casMod time.Time
	var casSize int64
	if a.opts.TrustedUserCAKeys != "" {
		fi, err := os.Stat(a.opts.TrustedUserCAKeys)
		if err != nil {
			return fmt.Errorf("--ssh-trusted-user-ca-keys: %w", err)
		}
		if cas, err = readCAs(a.opts.TrustedUserCAKeys); err != nil {
			return fmt.Errorf("--ssh-trusted-user-ca-keys: %w", err)
		}
		casMod, casSize = fi.ModTime(), fi.Size()
	}
	var hash []byte
	if a.opts.PasswordHashFile != "" {
		b, err := os.ReadFile(a.opts.PasswordHashFile)
		if err != nil {
			return fmt.Errorf("--ssh-password-hash-file: %w", err)
		}
		hash = bytes.TrimSpace(b)
		if _, err := bcrypt.Cost(hash); err != nil {
			return fmt.Errorf("--ssh-password-hash-file %s: not a bcrypt hash (make one with: htpasswd -nbBC 12 '' 'PASSWORD' | cut -d: -f2): %v", a.opts.PasswordHashFile, err)
		}
	}
	a.mu.Lock()
	a.keys, a.keysMod, a.keysLen, a.hash = keys, mod, size, hash
	a.cas, a.casMod, a.casLen = cas, casMod, casSize
	a.mu.Unlock()
	return nil
}

// refresh reloads authorized_keys and the CA keys when either file
// changed, so a key added or revoked applies to the next login without a
// restart.
func (a *Auth) refresh() {
	changed := func(name string, mod time.Time, size int64) bool {
		if name == "" {
			return false
		}
		fi, err := os.Stat(name)
		return err == nil && !(fi.ModTime().Equal(mod) && fi.Size() == size)
	}
	a.mu.Lock()
	stale := changed(a.opts.AuthorizedKeys, a.keysMod, a.keysLen) || changed(a.opts.TrustedUserCAKeys, a.casMod, a.casLen)
	a.mu.Unlock()
	if !stale {
		return
	}
	if err := a.Reload(); err != nil {
		a.log.Error("ssh: reloading the authorized keys failed; the previous keys stay in force", "err", err)
	} else {
		a.log.Info("ssh: authorized keys reloaded", "file", a.opts.AuthorizedKeys, "ca_file", a.opts.TrustedUserCAKeys)
	}
}

func addrOf(conn gossh.ConnMetadata) netip.Addr {
	if ta, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		if ap, ok := netip.AddrFromSlice(ta.IP); ok {
			return ap.Unmap()
		}
	}
	return netip.Addr{}
}

// PublicKey is the sshd PublicKeyCallback.
func (a *Auth) PublicKey(conn gossh.ConnMetadata, key gossh.PublicKey) (*gossh.Permissions, error) {
	a.refresh()
	addr := addrOf(conn)
	fp := gossh.FingerprintSHA256(key)
	a.mu.Lock()
	keys, cas := a.keys, a.cas
	a.mu.Unlock()
	if cert, ok := key.(*gossh.Certificate); ok {
		fp = gossh.FingerprintSHA256(cert.Key) + " cert " + fmt.Sprintf("%q serial %d", cert.KeyId, cert.Serial)
		perms, err := checkCert(conn, cert, cas)
		if err != nil {
			a.failed(conn, "publickey", fp, err.Error())
			return nil, err
		}
		a.succeeded(conn, "publickey", fp)
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
		a.succeeded(conn, "publickey", fp)
		return k.permissions(), nil
	}
	a.failed(conn, "publickey", fp, "unknown key")
	return nil, errors.New("unknown key")
}

// Password is the sshd PasswordCallback: bcrypt's comparison, which takes
// the same time whatever the password.
func (a *Auth) Password(conn gossh.ConnMetadata, password []byte) (*gossh.Permissions, error) {
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
	return &gossh.Permissions{Extensions: map[string]string{"auth": "password"}}, nil
}

func (a *Auth) succeeded(conn gossh.ConnMetadata, method, fp string) {
	a.log.Info("ssh login", "user", conn.User(), "method", method, "key", fp, "remote", conn.RemoteAddr().String(), "outcome", "accepted")
	if a.opts.Attempt != nil {
		a.opts.Attempt(method, "accepted")
	}
	a.fmu.Lock()
	delete(a.failures, addrOf(conn))
	a.fmu.Unlock()
}

// failed logs and counts the attempt, then makes the next one from the
// same address wait: the delay doubles with each failure.
func (a *Auth) failed(conn gossh.ConnMetadata, method, fp, why string) {
	a.log.Warn("ssh login refused", "user", conn.User(), "method", method, "key", fp, "remote", conn.RemoteAddr().String(), "why", why)
	if a.opts.Attempt != nil {
		a.opts.Attempt(method, "refused")
	}
	addr := addrOf(conn)
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
	return strings.Join(parts, " and ")
}

package sshauth

import (
	"bytes"
	"errors"
	"maps"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/admit"
)

// loginKey is the key, in a login's Permissions.ExtraData, of what
// admitted it (*login), for Recheck.
type loginKey struct{}

// login is what admitted a connection: its key or certificate and the
// permissions the files gave it then, or the password hash it matched.
type login struct {
	key  gossh.PublicKey
	ext  map[string]string
	hash []byte // a password login: the hash in force then
}

// remember records in perms what admitted the login.
func remember(perms *gossh.Permissions, l *login) *gossh.Permissions {
	if perms == nil {
		perms = &gossh.Permissions{}
	}
	if perms.ExtraData == nil {
		perms.ExtraData = map[any]any{}
	}
	perms.ExtraData[loginKey{}] = l
	return perms
}

// Recheck judges a logged-in connection's login again with the files in
// force (reloading those that changed first, as a login does): nil when
// they still admit it with the same permissions, else why not. A key
// removed from authorized_keys (or its file failing to load), a key whose
// from= no longer admits the address or whose options changed, a
// certificate whose CA was removed or that has expired, a password whose
// hash file now holds another hash: each is refused. The SSH core calls
// it before each new channel (sshd.Transport.Recheck) and, for every open
// connection, after a file changed (Options.Changed).
func (a *Auth) Recheck(conn gossh.ConnMetadata, perms *gossh.Permissions) error {
	a.refresh()
	var l *login
	if perms != nil {
		l, _ = perms.ExtraData[loginKey{}].(*login)
	}
	if l == nil {
		return errors.New("the login is not one this daemon's files admitted")
	}
	a.mu.Lock()
	keys, cas, hash := a.keys, a.cas, a.hash
	a.mu.Unlock()
	if l.key == nil {
		if hash == nil || !bytes.Equal(hash, l.hash) {
			return errors.New("the password hash file changed (or no longer loads)")
		}
		return nil
	}
	if cert, ok := l.key.(*gossh.Certificate); ok {
		p, err := checkCert(conn, cert, cas, a.principals)
		if err != nil {
			return errors.New("the certificate is no longer admitted: " + err.Error())
		}
		if !maps.Equal(p.Extensions, l.ext) {
			return errors.New("the certificate's permissions changed")
		}
		return nil
	}
	for i := range keys {
		k := &keys[i]
		if !bytes.Equal(k.Key.Marshal(), l.key.Marshal()) {
			continue
		}
		if !k.allows(admit.ClientAddr(conn.RemoteAddr())) {
			return errors.New("the key's from= no longer admits this address")
		}
		if !maps.Equal(k.permissions().Extensions, l.ext) {
			return errors.New("the key's options in authorized_keys changed")
		}
		return nil
	}
	return errors.New("the key was removed from authorized_keys (or the file no longer loads)")
}

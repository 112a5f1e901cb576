package sshauth

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// publicOnly is a client that knows an authorized public key (public keys
// are public: GitHub serves them) but not its private key: x/crypto's
// client queries the key first, and only then fails to sign.
type publicOnly struct{ pk gossh.PublicKey }

func (p publicOnly) PublicKey() gossh.PublicKey { return p.pk }
func (p publicOnly) Sign(io.Reader, []byte) (*gossh.Signature, error) {
	return nil, errors.New("no private key")
}

// TestQueryIsNoLogin: x/crypto calls PublicKeyCallback when a client
// merely asks whether a key would do, before any signature. Such a query
// of an authorized key, by a client that cannot sign, is not logged or
// counted as an accepted login, and does not wipe the address's failures
// (which would let it reset the back-off between password guesses). A
// real login, signed, is accepted (VerifiedPublicKey).
func TestQueryIsNoLogin(t *testing.T) {
	good := newSigner(t)
	logs := &syncBuffer{}
	var mu sync.Mutex
	var attempts []string
	var slept []time.Duration
	a, err := New(Options{AuthorizedKeys: writeKeys(t, line(good.PublicKey())),
		Logger:  slog.New(slog.NewTextHandler(logs, nil)),
		Attempt: func(m, o string) { mu.Lock(); attempts = append(attempts, m+":"+o); mu.Unlock() },
		sleep:   func(d time.Duration) { mu.Lock(); slept = append(slept, d); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	conf := &gossh.ServerConfig{PublicKeyCallback: a.PublicKey, VerifiedPublicKeyCallback: a.VerifiedPublicKey}
	conf.AddHostKey(newSigner(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if sc, _, _, err := gossh.NewServerConn(c, conf); err == nil {
					sc.Close()
				}
			}()
		}
	}()
	login := func(s gossh.Signer) error {
		c, err := gossh.Dial("tcp", ln.Addr().String(), &gossh.ClientConfig{User: "agent",
			Auth: []gossh.AuthMethod{gossh.PublicKeys(s)}, HostKeyCallback: gossh.InsecureIgnoreHostKey()})
		if err == nil {
			c.Close()
		}
		return err
	}

	if login(newSigner(t)) == nil { // one failure from 127.0.0.1
		t.Fatal("an unknown key logged in")
	}
	if login(publicOnly{good.PublicKey()}) == nil {
		t.Fatal("a client without the private key logged in")
	}
	if strings.Contains(logs.String(), "outcome=accepted") {
		t.Fatalf("a query was logged as an accepted login:\n%s", logs)
	}
	if login(newSigner(t)) == nil {
		t.Fatal("an unknown key logged in")
	}
	mu.Lock()
	got := append([]time.Duration(nil), slept...)
	joined := strings.Join(attempts, ",")
	mu.Unlock()
	if len(got) != 2 || got[1] != 2*got[0] {
		t.Fatalf("delays %v: the query between two failures reset the back-off", got)
	}
	if strings.Contains(joined, "accepted") {
		t.Fatalf("a query was counted as accepted: %s", joined)
	}
	if err := login(good); err != nil {
		t.Fatalf("a signed login: %v", err)
	}
	mu.Lock()
	joined = strings.Join(attempts, ",")
	mu.Unlock()
	if !strings.Contains(logs.String(), "outcome=accepted") || strings.Count(joined, "publickey:accepted") != 1 {
		t.Fatalf("a signed login was not accepted once: %s\n%s", joined, logs)
	}
}

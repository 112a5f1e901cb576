package sshauth

import (
	//lint:ignore SA1019 the test makes a DSA key to show that the daemon refuses one
	"crypto/dsa"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

func rsaKey(t *testing.T, bits int) gossh.PublicKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := gossh.NewPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

func dsaKey(t *testing.T) gossh.PublicKey {
	t.Helper()
	var k dsa.PrivateKey
	if err := dsa.GenerateParameters(&k.Parameters, rand.Reader, dsa.L1024N160); err != nil {
		t.Fatal(err)
	}
	if err := dsa.GenerateKey(&k, rand.Reader); err != nil {
		t.Fatal(err)
	}
	pk, err := gossh.NewPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pk
}

// TestWeakKeysAdmitNobody: x/crypto's server verifies ssh-dss and RSA
// signatures of any size; the daemon refuses a DSA key or an RSA key under
// 2048 bits in authorized_keys (the whole file, with its line, as an
// unsupported option is), as a CA key, and as the key of a certificate a
// trusted CA signed. RSA of 2048 bits is admitted.
func TestWeakKeysAdmitNobody(t *testing.T) {
	dss, rsa1024, rsa2048 := dsaKey(t), rsaKey(t, 1024), rsaKey(t, 2048)
	for name, c := range map[string]struct {
		pk   gossh.PublicKey
		want string
	}{
		"dsa":      {dss, "keys:2: an ssh-dss (DSA) key is too weak"},
		"rsa 1024": {rsa1024, "keys:2: an RSA key of 1024 bits is too weak"},
	} {
		if _, err := ParseAuthorizedKeys("keys", []byte("# a weak key\n"+line(c.pk)+"\n")); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("authorized_keys with %s: %v; want %q", name, err, c.want)
		}
		if _, err := ParseTrustedUserCAKeys("ca.pub", []byte("# a weak key\n"+line(c.pk)+"\n")); err == nil || !strings.Contains(err.Error(), strings.Replace(c.want, "keys:", "ca.pub:", 1)) {
			t.Errorf("CA file with %s: %v", name, err)
		}
	}
	if keys, err := ParseAuthorizedKeys("keys", []byte(line(rsa2048)+"\n")); err != nil || len(keys) != 1 {
		t.Fatalf("RSA 2048: %v", err)
	}

	ca := newSigner(t)
	a, err := New(Options{TrustedUserCAKeys: writeKeys(t, line(ca.PublicKey())), sleep: func(time.Duration) {}})
	if err != nil {
		t.Fatal(err)
	}
	for name, pk := range map[string]gossh.PublicKey{"dsa": dss, "rsa 1024": rsa1024} {
		if _, err := a.PublicKey(from("127.0.0.1"), userCert(t, ca, pk, nil)); err == nil || !strings.Contains(err.Error(), "too weak") {
			t.Errorf("a certificate for a %s key: %v", name, err)
		}
	}
	if _, err := a.PublicKey(from("127.0.0.1"), userCert(t, ca, rsa2048, nil)); err != nil {
		t.Errorf("a certificate for an RSA 2048 key: %v", err)
	}
}

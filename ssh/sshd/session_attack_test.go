package sshd

import (
	"fmt"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// setEnv sends one env request on s and says whether the server accepted it.
func setEnv(t *testing.T, s *gossh.Session, name, value string) bool {
	t.Helper()
	return s.Setenv(name, value) == nil
}

// TestAttackEnvRequestsBounded: a client may send any number of env
// requests before its command, and the default allowlist admits every
// LC_* name, so each accepted request used to be kept: 100,000 of them
// with 200 KiB values held gigabytes. A session keeps at most
// MaxSessionEnv variables and MaxSessionEnvBytes of names and values; past
// either the request is refused (as OpenSSH's sshd ignores more than 128),
// and what was accepted still reaches the command.
func TestAttackEnvRequestsBounded(t *testing.T) {
	// The daemon's default allowlist (config: --ssh-env-allowlist).
	e := newEnv(t, withOpts(func(o *testOptions) { o.EnvAllowlist = []string{"LANG", "LC_*", "TERM", "COLORTERM"} }))
	c := e.dial(t, "")

	t.Run("count", func(t *testing.T) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		accepted := 0
		for i := range 1000 {
			if setEnv(t, s, fmt.Sprintf("LC_X%d", i), "v") {
				accepted++
			}
		}
		if accepted != MaxSessionEnv {
			t.Fatalf("%d of 1000 env requests accepted, want %d (MaxSessionEnv)", accepted, MaxSessionEnv)
		}
		// Setting a name again replaces it: still accepted at the cap.
		if !setEnv(t, s, "LC_X0", "again") {
			t.Fatal("replacing an accepted variable at the cap was refused")
		}
		out, err := s.Output(`echo "$LC_X0 $LC_X1 ${LC_X` + fmt.Sprint(MaxSessionEnv) + `:-unset}"`)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(out); got != "again v unset\n" {
			t.Fatalf("command saw %q, want %q", got, "again v unset\n")
		}
	})

	t.Run("bytes", func(t *testing.T) {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		value := strings.Repeat("x", 200<<10) // one packet carries up to 256 KiB
		if setEnv(t, s, "LC_BIG", value) {
			t.Fatalf("a %d-byte variable was accepted; the limit is %d bytes", len(value), MaxSessionEnvBytes)
		}
		chunk := strings.Repeat("y", 8<<10)
		total := 0
		for i := range 64 {
			name := fmt.Sprintf("LC_Y%d", i)
			if setEnv(t, s, name, chunk) {
				total += len(name) + len(chunk)
			}
		}
		if total > MaxSessionEnvBytes || total < MaxSessionEnvBytes-(8<<10)-16 {
			t.Fatalf("%d bytes of variables accepted, want at most %d and close to it", total, MaxSessionEnvBytes)
		}
		// Replacing a value by a shorter one frees room.
		if !setEnv(t, s, "LC_Y0", "") || !setEnv(t, s, "LC_Z", strings.Repeat("z", 4<<10)) {
			t.Fatal("room freed by a shorter value was not given back")
		}
	})
}

package sshd

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// rawSFTP is a hostile client's SFTP session: the "sftp" subsystem of a
// session channel, written to and read from as raw packets.
type rawSFTP struct {
	t   *testing.T
	s   *gossh.Session
	in  io.WriteCloser
	out io.Reader
}

func openRawSFTP(t *testing.T, c *gossh.Client) *rawSFTP {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	in, _ := s.StdinPipe()
	out, _ := s.StdoutPipe()
	if err := s.RequestSubsystem("sftp"); err != nil {
		t.Fatal(err)
	}
	r := &rawSFTP{t, s, in, out}
	if a := r.do(1, 3); a[0] != 2 { // INIT 3 → VERSION
		t.Fatalf("INIT answered %q", a)
	}
	return r
}

// send writes one packet: type, then uint32 (int) and string fields.
func (r *rawSFTP) send(typ byte, fields ...any) {
	r.t.Helper()
	b := []byte{0, 0, 0, 0, typ}
	for _, f := range fields {
		switch v := f.(type) {
		case int:
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		case string:
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	if _, err := r.in.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// do sends a packet and returns its answer: type, then body.
func (r *rawSFTP) do(typ byte, fields ...any) []byte {
	r.t.Helper()
	r.send(typ, fields...)
	var hdr [4]byte
	if _, err := io.ReadFull(r.out, hdr[:]); err != nil {
		r.t.Fatal(err)
	}
	a := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(r.out, a); err != nil {
		r.t.Fatal(err)
	}
	return a
}

// status is a STATUS answer's code and message.
func status(t *testing.T, a []byte) (uint32, string) {
	t.Helper()
	if len(a) < 13 || a[0] != 101 {
		t.Fatalf("not a STATUS: %q", a)
	}
	n := binary.BigEndian.Uint32(a[9:])
	return binary.BigEndian.Uint32(a[5:]), string(a[13 : 13+n])
}

// TestAttackSFTPOverSSH: a hostile client over a real SSH connection, with
// a read-only token's workspace (fsops.ReadOnly, what admit.Caller gives
// it): writes are refused, the handle limit is the connection's across
// its SFTP sessions, a packet of 2^32-1 bytes ends only its own session,
// and a session's end gives its handles back.
func TestAttackSFTPOverSSH(t *testing.T) {
	var root string
	e := newEnv(t, withMode(""), withOpts(func(o *testOptions) {
		root = o.Workspace.Root()
		o.Workspace = fsops.ReadOnly(o.Workspace)
		o.SFTP.MaxHandles = 3
	}))
	if err := os.WriteFile(filepath.Join(root, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := e.dial(t, "")
	s1, s2 := openRawSFTP(t, c), openRawSFTP(t, c)
	for _, tc := range []struct {
		typ    byte
		fields []any
	}{
		{3, []any{10, "/f", 0x02 | 0x08 | 0x10, 0}}, // OPEN WRITE|CREAT|TRUNC
		{9, []any{11, "/f", 4, 0o777}},              // SETSTAT permissions
		{13, []any{12, "/f"}},                       // REMOVE
		{14, []any{13, "/d", 0}},                    // MKDIR
		{18, []any{14, "/f", "/g"}},                 // RENAME
		{20, []any{15, "f", "/l"}},                  // SYMLINK
	} {
		if code, msg := status(t, s1.do(tc.typ, tc.fields...)); code != 3 || !strings.Contains(msg, "read-only") {
			t.Errorf("type %d: %d %q, want PERMISSION_DENIED", tc.typ, code, msg)
		}
	}
	for i := 0; i < 2; i++ {
		if a := s1.do(3, 20+i, "/f", 0x01, 0); a[0] != 102 {
			t.Fatalf("OPEN %d: %q", i, a)
		}
	}
	if a := s2.do(3, 30, "/f", 0x01, 0); a[0] != 102 {
		t.Fatalf("the third OPEN: %q", a)
	}
	if code, msg := status(t, s2.do(11, 31, "/")); code != 4 || !strings.Contains(msg, "limit 3 per connection") {
		t.Fatalf("OPENDIR over the connection's limit: %d %q", code, msg)
	}
	// A length of 2^32-1 ends s2 (its channel closes) and nothing else.
	if _, err := s2.in.Write([]byte{0xff, 0xff, 0xff, 0xff, 5}); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, s2.out); n != 0 || err != nil {
		t.Fatalf("after the bad length: %d bytes, %v", n, err)
	}
	s2.s.Close()
	// s2's handle is given back, s1's are kept.
	s3 := openRawSFTP(t, c)
	if a := s3.do(11, 40, "/"); a[0] != 102 {
		t.Fatalf("OPENDIR once s2 ended: %q", a)
	}
	if code, _ := status(t, s3.do(3, 41, "/f", 0x01, 0)); code != 4 {
		t.Fatalf("a fourth handle: %d", code)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "f")); string(b) != "data" {
		t.Fatalf("f holds %q", b)
	}
	s1.s.Close()
	s3.s.Close()
}

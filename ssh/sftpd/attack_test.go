package sftpd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// Attack tests: what a client holding a valid token (maybe a read-only or
// scope-bound one) can make the server do with hand-made packets. Each
// checks what the server answers and that the workspace's confinement held;
// docs/security.md's SFTP attack review lists them.

// attackRequest is a request as its fields, so that a test can cut it or
// lie in one of its string lengths.
type attackRequest struct {
	typ    byte
	fields []any // as sftpPacket takes them; the first is the id (INIT: the version)
}

func (r attackRequest) packet() []byte { return sftpPacket(r.typ, r.fields...) }

// attackRequests is one request of every type the server decodes, every
// extension and every attribute flag included.
func attackRequests() []attackRequest {
	allAttrs := []any{uint32(attrSize | attrUIDGID | attrPermissions | attrACModTime | attrExtended),
		uint64(3), 0, 0, 0o644, 1, 2, 1, "ext", "data"}
	return []attackRequest{
		{fxpInit, []any{3, "ext@example.com", "1"}},
		{fxpOpen, []any{1, "/a.txt", fxfRead, 0}},
		{fxpClose, []any{2, "1"}},
		{fxpRead, []any{3, "1", uint64(0), 10}},
		{fxpWrite, []any{4, "1", uint64(0), "abc"}},
		{fxpLstat, []any{5, "/a.txt"}},
		{fxpFstat, []any{6, "1"}},
		{fxpSetstat, append([]any{7, "/a.txt"}, allAttrs...)},
		{fxpFsetstat, append([]any{8, "1"}, allAttrs...)},
		{fxpOpendir, []any{9, "/dir"}},
		{fxpReaddir, []any{10, "1"}},
		{fxpRemove, []any{11, "/nope"}},
		{fxpMkdir, []any{12, "/nope/m", attrPermissions, 0o755}},
		{fxpRmdir, []any{13, "/nope"}},
		{fxpRealpath, []any{14, "/dir/../a.txt"}},
		{fxpStat, []any{15, "/a.txt"}},
		{fxpRename, []any{16, "/nope", "/nope2"}},
		{fxpReadlink, []any{17, "/lnk"}},
		{fxpSymlink, []any{18, "a.txt", "/nope/s"}},
		{fxpExtended, []any{19, "posix-rename@openssh.com", "/nope", "/nope2"}},
		{fxpExtended, []any{20, "hardlink@openssh.com", "/a.txt", "/h"}},
		{fxpExtended, []any{21, "statvfs@openssh.com", "/"}},
		{fxpExtended, []any{22, "fsync@openssh.com", "1"}},
		{99, []any{23, "x"}},
		{fxpOpen, []any{24, "/a.txt", fxfRead, attrPermissions | attrACModTime, 0o644, 1, 2}},
	}
}

// tolerant reports whether the server may answer r cut after `at` bytes of
// its body (or with a lying string length in its string field number str,
// counted from 0), rather than end the session: what INIT, unknown
// extensions and unknown types leave undecoded can be anything.
func (r attackRequest) tolerant(at, str int) bool {
	switch r.typ {
	case fxpInit, 99:
		return true
	case fxpExtended:
		name := r.fields[1].(string)
		if name == "posix-rename@openssh.com" || name == "hardlink@openssh.com" || name == "statvfs@openssh.com" {
			return false
		}
		return at >= 4+4+len(name) && str != 0
	}
	return false
}

// serveBytes serves in (the whole client stream) on a fresh session over
// ws and returns Serve's error and what it wrote.
func serveBytes(ws fsops.Workspace, in []byte) ([]byte, error) {
	ch := &fakeChannel{r: bytes.NewReader(in)}
	err := newSFTPServer(ws, ch).Serve()
	return ch.w.Bytes(), err
}

// TestAttackPacketLengths: every length a client can put in a packet's
// header, and a stream that ends inside a packet.
func TestAttackPacketLengths(t *testing.T) {
	ws := sftpTestWorkspace(t)
	be32 := func(n uint32, rest ...byte) []byte { return append(binary.BigEndian.AppendUint32(nil, n), rest...) }
	maxWrite := sftpPacket(fxpWrite, 1, "nope", uint64(0), strings.Repeat("x", sftpMaxPacket-1-4-8-4-4-4))
	for _, tc := range []struct {
		name string
		in   []byte
		want error // nil: served, one answer
	}{
		{"length 0", be32(0), ErrMalformed},
		{"length 1", be32(1, fxpStat), ErrMalformed},
		{"length 2", be32(2, fxpStat, 0), ErrMalformed},
		{"length 3", be32(3, fxpStat, 0, 0), ErrMalformed},
		{"length 4", be32(4, fxpStat, 0, 0, 0), ErrMalformed},
		{"length 5, an id and no path", be32(5, fxpStat, 0, 0, 0, 1), ErrMalformed},
		{"length 1, INIT", be32(1, fxpInit), ErrMalformed},
		{"the limit exactly", maxWrite, nil},
		{"one past the limit", be32(sftpMaxPacket+1, fxpWrite), ErrPacketTooLong},
		{"2^32-1", be32(math.MaxUint32, fxpWrite), ErrPacketTooLong},
		{"half a length", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"promises 100, sends 10", be32(100, fxpStat, 0, 0, 0, 1, 0, 0, 0, 1, '/'), io.ErrUnexpectedEOF},
		{"promises 256 KiB, sends none", be32(sftpMaxPacket), io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.in) >= 4 && tc.want == nil && binary.BigEndian.Uint32(tc.in) != sftpMaxPacket {
				t.Fatalf("the test's packet is %d bytes", binary.BigEndian.Uint32(tc.in))
			}
			out, err := serveBytes(ws, tc.in)
			if tc.want == nil {
				if err != io.EOF {
					t.Fatalf("Serve: %v, want io.EOF after one answer", err)
				}
				if _, code, _ := sftpStatusOf(t, out); code != stFailure {
					t.Fatalf("answer %q", out)
				}
				return
			}
			if !errors.Is(err, tc.want) || len(out) != 0 {
				t.Fatalf("Serve: %v, answers %q; want %v and none", err, out, tc.want)
			}
		})
	}
}

// TestAttackTruncatedRequests cuts every request type at every byte of its
// body, and lies in each of its string lengths (one past the packet's end,
// and 2^32-1): the session ends with ErrMalformed and no answer, except
// where the server does not decode that part (INIT's extensions, an unknown
// extension's or type's fields), where it answers once, with the id.
func TestAttackTruncatedRequests(t *testing.T) {
	ws := sftpTestWorkspace(t)
	check := func(t *testing.T, r attackRequest, in []byte, tolerant bool) {
		t.Helper()
		out, err := serveBytes(ws, in)
		if len(out) == 0 {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%x: Serve: %v, no answer; want ErrMalformed", in, err)
			}
			return
		}
		if !tolerant {
			t.Fatalf("%x: answered %q (Serve: %v); want the session ended", in, out, err)
		}
		n := binary.BigEndian.Uint32(out)
		if uint64(n)+4 != uint64(len(out)) {
			t.Fatalf("%x: more than one answer: %q", in, out)
		}
		if r.typ != fxpInit && binary.BigEndian.Uint32(out[5:]) != uint32(r.fields[0].(int)) {
			t.Fatalf("%x: answer %q has another id", in, out)
		}
	}
	for _, r := range attackRequests() {
		t.Run(fmt.Sprintf("type %d", r.typ), func(t *testing.T) {
			full := r.packet()
			body := full[4:]
			for at := 1; at < len(body); at++ {
				in := binary.BigEndian.AppendUint32(nil, uint32(at))
				in = append(in, body[:at]...)
				// The id is the first 4 bytes of the body after the type.
				check(t, r, in, r.tolerant(at-1, -1) && at >= 5)
			}
			str := 0
			for i, f := range r.fields {
				s, ok := f.(string)
				if !ok {
					continue
				}
				for _, lie := range []uint32{0, math.MaxUint32} {
					fields := append([]any(nil), r.fields...)
					// The field's length is replaced; its bytes follow raw.
					fields[i] = []byte("\xff\xff\xff\xff" + s)
					in := sftpPacket(r.typ, fields...)
					at := bytes.Index(in[5:], []byte("\xff\xff\xff\xff"+s)) + 5
					if lie == 0 {
						lie = uint32(len(in) - at - 4 + 1) // one past the end
					}
					binary.BigEndian.PutUint32(in[at:], lie)
					check(t, r, in, r.tolerant(len(r.packet()), str))
				}
				str++
			}
		})
	}
	// And whole, each is served: the session goes on.
	var all []byte
	for _, r := range attackRequests() {
		all = append(all, r.packet()...)
	}
	if out, err := serveBytes(sftpTestWorkspace(t), all); err != io.EOF || len(out) == 0 {
		t.Fatalf("the requests whole: Serve %v", err)
	}
}

// handleAnswer decodes a HANDLE answer.
func handleAnswer(t testing.TB, a []byte) string {
	t.Helper()
	if len(a) < 13 || a[4] != fxpHandle {
		t.Fatalf("not a HANDLE: %q", a)
	}
	d := sftpDecoder{b: a[9:]}
	return d.str()
}

// statusCode is a STATUS answer's code.
func statusCode(t testing.TB, a []byte) uint32 {
	t.Helper()
	_, code, _ := sftpStatusOf(t, a)
	return code
}

// TestAttackHandles: handles used after CLOSE, of the wrong kind, forged,
// closed twice, or of another session.
func TestAttackHandles(t *testing.T) {
	ws := sftpTestWorkspace(t)
	s := newSFTPSession(t, ws)
	f := handleAnswer(t, s.do(sftpPacket(fxpOpen, 1, "/a.txt", fxfRead, 0)))
	d := handleAnswer(t, s.do(sftpPacket(fxpOpendir, 2, "/dir")))
	for _, tc := range []struct {
		name string
		req  []byte
		msg  string
	}{
		{"READ on a directory handle", sftpPacket(fxpRead, 3, d, uint64(0), 10), "read on a directory handle"},
		{"WRITE on a directory handle", sftpPacket(fxpWrite, 4, d, uint64(0), "x"), "write on a directory handle"},
		{"READDIR on a file handle", sftpPacket(fxpReaddir, 5, f), "readdir on a file handle"},
		{"WRITE on a read-only handle", sftpPacket(fxpWrite, 6, f, uint64(0), "x"), "bad file descriptor"},
		{"forged: 0", sftpPacket(fxpRead, 7, "0", uint64(0), 10), "bad file descriptor"},
		{"forged: leading zero", sftpPacket(fxpRead, 8, "0"+f, uint64(0), 10), "bad file descriptor"},
		{"forged: trailing space", sftpPacket(fxpRead, 9, f+" ", uint64(0), 10), "bad file descriptor"},
		{"forged: NUL", sftpPacket(fxpRead, 10, f+"\x00", uint64(0), 10), "bad file descriptor"},
		{"forged: -1", sftpPacket(fxpClose, 11, "-1"), "bad file descriptor"},
		{"forged: 200 KiB", sftpPacket(fxpClose, 12, strings.Repeat("9", 200<<10)), "bad file descriptor"},
		{"forged: FSTAT", sftpPacket(fxpFstat, 13, "3"), "bad file descriptor"},
		{"forged: FSETSTAT", sftpPacket(fxpFsetstat, 14, "3", attrPermissions, 0o777), "bad file descriptor"},
	} {
		_, code, msg := sftpStatusOf(t, s.do(tc.req))
		if code != stFailure || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %d %q, want FAILURE %q", tc.name, code, msg, tc.msg)
		}
	}
	if st, _ := os.Stat(filepath.Join(ws.Root(), "a.txt")); st.Mode().Perm() == 0o777 {
		t.Fatal("a forged FSETSTAT changed a file")
	}

	// Another session's handles are not this one's, even with the same
	// number: each session numbers its own.
	other := newSFTPSession(t, ws)
	if code := statusCode(t, other.do(sftpPacket(fxpRead, 20, f, uint64(0), 10))); code != stFailure {
		t.Fatalf("another session's handle: %d", code)
	}

	// Closed, a handle is gone; closing it again is EBADF, not a second
	// release of its share of the connection's limit.
	for _, h := range []string{f, d} {
		if code := statusCode(t, s.do(sftpPacket(fxpClose, 30, h))); code != stOK {
			t.Fatalf("CLOSE %s: %d", h, code)
		}
		if _, code, msg := sftpStatusOf(t, s.do(sftpPacket(fxpClose, 31, h))); code != stFailure || msg != "bad file descriptor" {
			t.Fatalf("CLOSE %s again: %d %q", h, code, msg)
		}
		if code := statusCode(t, s.do(sftpPacket(fxpRead, 32, h, uint64(0), 10))); code != stFailure {
			t.Fatalf("READ after CLOSE: %d", code)
		}
		if code := statusCode(t, s.do(sftpPacket(fxpReaddir, 33, h))); code != stFailure {
			t.Fatalf("READDIR after CLOSE: %d", code)
		}
	}
}

// TestAttackHandleCountAfterDoubleClose: closing a handle twice, or a
// forged one, gives back nothing: the connection's count stays exact.
func TestAttackHandleCountAfterDoubleClose(t *testing.T) {
	ws := sftpTestWorkspace(t)
	lim := NewConnLimits(2, 1, Shared{})
	s := &sftpSession{t, pipeServer(t, func(c net.Conn) error {
		return NewServer(t.Context(), ws, c, lim).Serve()
	})}
	s.do(sftpPacket(fxpInit, 3))
	h := handleAnswer(t, s.do(sftpPacket(fxpOpen, 1, "/a.txt", fxfRead, 0)))
	s.do(sftpPacket(fxpClose, 2, h))
	for i := 0; i < 5; i++ {
		s.do(sftpPacket(fxpClose, 3, h))
		s.do(sftpPacket(fxpClose, 4, "77"))
	}
	if n := lim.handles.Held(); n != 0 {
		t.Fatalf("%d handles counted, want 0", n)
	}
	handleAnswer(t, s.do(sftpPacket(fxpOpen, 5, "/a.txt", fxfRead, 0)))
	handleAnswer(t, s.do(sftpPacket(fxpOpen, 6, "/a.txt", fxfRead, 0)))
	if code := statusCode(t, s.do(sftpPacket(fxpOpen, 7, "/a.txt", fxfRead, 0))); code != stFailure {
		t.Fatalf("a third OPEN within a limit of 2: %d", code)
	}
}

// attackTree is a workspace at <tmp>/ws beside <tmp>/outside (a file the
// tests check is never read or changed), with links a command could have
// planted: out -> the outside directory, abs -> the outside file by its
// absolute path, up -> "..", and in -> a.txt.
func attackTree(t *testing.T) (ws fsops.Workspace, root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "ws"), filepath.Join(base, "outside")
	for _, d := range []string{root, outside, filepath.Join(root, "dir")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for p, data := range map[string]string{filepath.Join(outside, "secret"): "secret", filepath.Join(root, "a.txt"): "hello"} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"out": outside, "abs": filepath.Join(outside, "secret"), "up": "..", "in": "a.txt"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, root, outside
}

// outsideUntouched fails unless the outside directory holds just the
// secret, unchanged, with its mode.
func outsideUntouched(t *testing.T, outside string) {
	t.Helper()
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 || ents[0].Name() != "secret" {
		t.Fatalf("the outside directory holds %v", ents)
	}
	st, err := os.Stat(filepath.Join(outside, "secret"))
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "secret" || st.Mode().Perm() != 0o644 {
		t.Fatalf("the outside file was changed: %q %v", b, st.Mode())
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "x")); err == nil {
		t.Fatal("a file was made beside the workspace")
	}
}

// TestAttackPathsStayInside: "..", absolute paths, and symlinks leading
// out (planted by a command, or made with SYMLINK), through every request
// that takes a path. Nothing outside is read, listed, changed or named;
// REALPATH and READLINK never answer a host path outside.
func TestAttackPathsStayInside(t *testing.T) {
	ws, root, outside := attackTree(t)
	s := newSFTPSession(t, ws)
	secret := filepath.Join(outside, "secret")
	rel := "../outside/secret"

	// Paths that name the outside file lexically are the workspace's own
	// files: ".." stops at "/", and "/" is the root.
	for _, p := range []string{rel, "/../outside/secret", "/../../../../" + secret, secret, "//" + secret} {
		if code := statusCode(t, s.do(sftpPacket(fxpOpen, 1, p, fxfRead, 0))); code != stNoSuchFile {
			t.Errorf("OPEN %q: %d, want NO_SUCH_FILE", p, code)
		}
	}
	for _, p := range []string{rel, "/../outside/secret", "/../../../../" + secret, secret, "//" + secret} {
		// Created, it is created inside (outsideUntouched checks).
		if a := s.do(sftpPacket(fxpOpen, 2, p, fxfWrite|fxfCreat|fxfTrunc, 0)); a[4] == fxpHandle {
			s.do(sftpPacket(fxpClose, 2, handleAnswer(t, a)))
		}
	}
	if _, err := os.Stat(filepath.Join(root, "outside", "secret")); err != nil {
		t.Fatalf("OPEN ../outside/secret to create made no file inside: %v", err)
	}
	os.RemoveAll(filepath.Join(root, "outside"))
	os.RemoveAll(filepath.Join(root, strings.Split(secret, "/")[1]))
	// Through a planted link, every request is PERMISSION_DENIED.
	denied := func(name string, req []byte) {
		t.Helper()
		if _, code, msg := sftpStatusOf(t, s.do(req)); code != stPermissionDenied || strings.Contains(msg, filepath.Dir(root)) {
			t.Errorf("%s: %d %q, want PERMISSION_DENIED naming no host path", name, code, msg)
		}
	}
	for _, p := range []string{"/out/secret", "/abs", "/up/outside/secret", "/dir/../out/secret"} {
		denied("OPEN "+p, sftpPacket(fxpOpen, 3, p, fxfRead, 0))
		denied("OPEN for writing "+p, sftpPacket(fxpOpen, 4, p, fxfWrite|fxfTrunc, 0))
		denied("STAT "+p, sftpPacket(fxpStat, 5, p))
		denied("SETSTAT "+p, sftpPacket(fxpSetstat, 6, p, attrPermissions|attrSize, uint64(0), 0o777))
		denied("REALPATH "+p, sftpPacket(fxpRealpath, 10, p))
		denied("statvfs "+p, sftpPacket(fxpExtended, 11, "statvfs@openssh.com", p))
		if p == "/abs" {
			continue // the link itself is the workspace's: below
		}
		denied("REMOVE "+p, sftpPacket(fxpRemove, 7, p))
		denied("RENAME from "+p, sftpPacket(fxpRename, 8, p, "/stolen"))
		denied("posix-rename from "+p, sftpPacket(fxpExtended, 9, "posix-rename@openssh.com", p, "/stolen"))
	}
	for _, p := range []string{"/out", "/up"} {
		denied("OPENDIR "+p, sftpPacket(fxpOpendir, 12, p))
		denied("MKDIR in "+p, sftpPacket(fxpMkdir, 13, p+"/x", 0))
		denied("RENAME into "+p, sftpPacket(fxpRename, 14, "/a.txt", p+"/x"))
		denied("posix-rename into "+p, sftpPacket(fxpExtended, 15, "posix-rename@openssh.com", "/a.txt", p+"/x"))
		denied("SYMLINK in "+p, sftpPacket(fxpSymlink, 16, "a.txt", p+"/x"))
		denied("OPEN to create in "+p, sftpPacket(fxpOpen, 17, p+"/x", fxfWrite|fxfCreat, 0))
	}
	// A dangling link leading out: OPEN with CREAT would follow it, and
	// is refused; so is anything through it.
	if err := os.Symlink(filepath.Join(outside, "x"), filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	for _, flags := range []uint32{fxfWrite | fxfCreat, fxfWrite | fxfCreat | fxfTrunc, fxfRead | fxfWrite | fxfCreat | fxfAppend} {
		denied(fmt.Sprintf("OPEN %#x /dangling", flags), sftpPacket(fxpOpen, 17, "/dangling", flags, 0))
	}
	denied("SETSTAT /dangling", sftpPacket(fxpSetstat, 17, "/dangling", attrSize, uint64(0)))
	denied("MKDIR /dangling/d", sftpPacket(fxpMkdir, 17, "/dangling/d", 0))
	// READLINK of a link leading out does not say where.
	for _, p := range []string{"/out", "/abs", "/up"} {
		a := s.do(sftpPacket(fxpReadlink, 18, p))
		if bytes.Contains(a, []byte(outside)) || bytes.Contains(a, []byte(filepath.Dir(root))) {
			t.Errorf("READLINK %s names a host path: %q", p, a)
		}
		denied("READLINK "+p, sftpPacket(fxpReadlink, 19, p))
	}
	// LSTAT describes a planted link without following it; RENAME and
	// REMOVE of the link move and remove the link, not what it names.
	if a := s.do(sftpPacket(fxpLstat, 20, "/out")); a[4] != fxpAttrs {
		t.Errorf("LSTAT /out: %q", a)
	}
	if code := statusCode(t, s.do(sftpPacket(fxpRename, 20, "/abs", "/abs2"))); code != stOK {
		t.Errorf("RENAME of the link /abs: %d", code)
	}
	if code := statusCode(t, s.do(sftpPacket(fxpRemove, 20, "/abs2"))); code != stOK {
		t.Errorf("REMOVE of the link /abs2: %d", code)
	}
	// REALPATH answers in the SFTP view, whatever the client sends.
	for p, want := range map[string]string{"": "/", ".": "/", "..": "/", "/../..": "/", "../dir": "/dir", root + "/dir": "/dir", "/in": "/in"} {
		a := s.do(sftpPacket(fxpRealpath, 21, p))
		if a[4] != fxpName {
			t.Errorf("REALPATH %q: %q", p, a)
			continue
		}
		d := sftpDecoder{b: a[13:]}
		if got := d.str(); got != want {
			t.Errorf("REALPATH %q = %q, want %q", p, got, want)
		}
	}
	// SYMLINK whose target leads out is refused, whatever its spelling;
	// an absolute target is the workspace's path, stored relative.
	for _, target := range []string{"..", "../outside/secret", "dir/../../outside", "up/outside", "out/secret", "/up/outside"} {
		denied("SYMLINK -> "+target, sftpPacket(fxpSymlink, 22, target, "/l"))
	}
	if code := statusCode(t, s.do(sftpPacket(fxpSymlink, 23, secret, "/l2"))); code != stOK {
		t.Fatalf("SYMLINK to an absolute path inside: %d", code)
	}
	if got, _ := os.Readlink(filepath.Join(root, "l2")); strings.HasPrefix(got, "/") || strings.Contains(got, "..") {
		t.Fatalf("stored target %q", got)
	}
	// A link made inside, carried out of meaning by RENAME of its
	// directory: refused from then on.
	os.MkdirAll(filepath.Join(root, "d1", "d2"), 0o755)
	if code := statusCode(t, s.do(sftpPacket(fxpSymlink, 24, "../../a.txt", "/d1/d2/l"))); code != stOK {
		t.Fatalf("SYMLINK ../../a.txt: %d", code)
	}
	if code := statusCode(t, s.do(sftpPacket(fxpRename, 25, "/d1/d2", "/d2"))); code != stOK {
		t.Fatalf("RENAME: %d", code)
	}
	denied("OPEN a link carried out", sftpPacket(fxpOpen, 26, "/d2/l", fxfRead, 0))
	denied("READLINK a link carried out", sftpPacket(fxpReadlink, 27, "/d2/l"))
	// hardlink@openssh.com is not served at all.
	if code := statusCode(t, s.do(sftpPacket(fxpExtended, 28, "hardlink@openssh.com", secret, "/h"))); code != stOpUnsupported {
		t.Fatalf("hardlink: %d", code)
	}
	// The root itself, however spelt, is not removed, moved, replaced or
	// made a link.
	for _, p := range []string{"/", "..", "/..", root} {
		for _, req := range [][]byte{
			sftpPacket(fxpRmdir, 29, p),
			sftpPacket(fxpRemove, 29, p),
			sftpPacket(fxpRename, 29, p, "/dir/x"),
			sftpPacket(fxpRename, 29, "/dir", p),
			sftpPacket(fxpExtended, 29, "posix-rename@openssh.com", p, "/y"),
			sftpPacket(fxpExtended, 29, "posix-rename@openssh.com", "/a.txt", p),
			sftpPacket(fxpSymlink, 29, "a.txt", p),
		} {
			if code := statusCode(t, s.do(req)); code == stOK {
				t.Fatalf("type %d on the root %q succeeded", req[4], p)
			}
		}
	}
	outsideUntouched(t, outside)
	if _, err := os.Stat(root); err != nil {
		t.Fatal(err)
	}
}

// TestAttackScopeBound: a scope-bound token's workspace is its scope
// (admit.Caller.Workspace opens it beneath the root's handle): the
// neighbouring scope is out of reach by "..", by its host path, and by a
// link planted in the scope.
func TestAttackScopeBound(t *testing.T) {
	parent, root, outside := attackTree(t)
	for _, p := range []string{"alice", "bob"} {
		if err := os.Mkdir(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "bob", "secret"), []byte("bob"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../bob", filepath.Join(root, "alice", "tobob")); err != nil {
		t.Fatal(err)
	}
	ws, err := parent.Scope("alice")
	if err != nil {
		t.Fatal(err)
	}
	s := newSFTPSession(t, ws)
	for _, p := range []string{"../bob/secret", "/../bob/secret", filepath.Join(root, "bob", "secret"), "/tobob/secret"} {
		for _, req := range [][]byte{
			sftpPacket(fxpOpen, 1, p, fxfRead, 0),
			sftpPacket(fxpOpen, 2, p, fxfWrite|fxfTrunc, 0),
			sftpPacket(fxpStat, 3, p),
			sftpPacket(fxpRemove, 4, p),
			sftpPacket(fxpSetstat, 5, p, attrSize, uint64(0)),
			sftpPacket(fxpRename, 6, p, "/x"),
		} {
			if a := s.do(req); a[4] != fxpStatus || statusCode(t, a) == stOK {
				t.Errorf("%q (type %d) reached: %q", p, req[4], a)
			}
		}
	}
	for _, p := range []string{"..", "/tobob", "../bob"} {
		if a := s.do(sftpPacket(fxpOpendir, 7, p)); a[4] == fxpHandle {
			// ".." is the scope's own root.
			h := handleAnswer(t, a)
			if names := bytes.Contains(s.do(sftpPacket(fxpReaddir, 8, h)), []byte("secret")); names {
				t.Errorf("OPENDIR %q lists bob's scope", p)
			}
		}
	}
	if code := statusCode(t, s.do(sftpPacket(fxpSymlink, 9, "../bob", "/l"))); code != stPermissionDenied {
		t.Errorf("SYMLINK to the neighbour: %d", code)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "bob", "secret")); string(b) != "bob" {
		t.Fatal("bob's file changed")
	}
	outsideUntouched(t, outside)
}

// TestAttackReadOnly: a read-only token's workspace (fsops.ReadOnly, what
// admit.Caller.Workspace gives it) refuses every request that writes, and
// nothing changes.
func TestAttackReadOnly(t *testing.T) {
	rw, root, outside := attackTree(t)
	ws := fsops.ReadOnly(rw)
	before := treeOf(t, root)
	s := newSFTPSession(t, ws)
	for _, req := range [][]byte{
		sftpPacket(fxpOpen, 1, "/a.txt", fxfWrite, 0),
		sftpPacket(fxpOpen, 2, "/a.txt", fxfRead|fxfWrite, 0),
		sftpPacket(fxpOpen, 3, "/a.txt", fxfRead|fxfAppend, 0),
		sftpPacket(fxpOpen, 4, "/a.txt", fxfRead|fxfTrunc, 0),
		sftpPacket(fxpOpen, 5, "/new", fxfRead|fxfCreat, 0),
		sftpPacket(fxpOpen, 6, "/new", fxfRead|fxfCreat|fxfExcl, 0),
		sftpPacket(fxpSetstat, 7, "/a.txt", attrSize, uint64(0)),
		sftpPacket(fxpSetstat, 8, "/a.txt", attrPermissions, 0o600),
		sftpPacket(fxpSetstat, 9, "/a.txt", attrACModTime, 1, 1),
		sftpPacket(fxpRemove, 10, "/a.txt"),
		sftpPacket(fxpRemove, 11, "/in"),
		sftpPacket(fxpMkdir, 12, "/m", 0),
		sftpPacket(fxpRmdir, 13, "/dir"),
		sftpPacket(fxpRename, 14, "/a.txt", "/b.txt"),
		sftpPacket(fxpExtended, 15, "posix-rename@openssh.com", "/a.txt", "/b.txt"),
		sftpPacket(fxpSymlink, 16, "a.txt", "/s"),
	} {
		if _, code, msg := sftpStatusOf(t, s.do(req)); code != stPermissionDenied {
			t.Errorf("type %d: %d %q, want PERMISSION_DENIED", req[4], code, msg)
		}
	}
	// A handle opened for reading cannot write, nor have its file's
	// attributes set.
	h := handleAnswer(t, s.do(sftpPacket(fxpOpen, 20, "/a.txt", fxfRead, 0)))
	if code := statusCode(t, s.do(sftpPacket(fxpWrite, 21, h, uint64(0), "x"))); code == stOK {
		t.Error("WRITE on a read-only handle")
	}
	for _, a := range [][]any{{attrSize, uint64(0)}, {attrPermissions, 0o777}, {attrACModTime, 1, 1}} {
		if code := statusCode(t, s.do(sftpPacket(fxpFsetstat, append([]any{22, h}, a...)...))); code != stPermissionDenied {
			t.Errorf("FSETSTAT %v: %d", a, code)
		}
	}
	// Reads still work.
	if a := s.do(sftpPacket(fxpRead, 23, h, uint64(0), 100)); a[4] != fxpData {
		t.Fatalf("READ: %q", a)
	}
	if after := treeOf(t, root); after != before {
		t.Fatalf("the workspace changed:\n%s\nwas\n%s", after, before)
	}
	outsideUntouched(t, outside)
}

// treeOf describes everything under root: names, modes, sizes, times,
// link targets.
func treeOf(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		target, _ := os.Readlink(p)
		fmt.Fprintf(&b, "%s %v %d %d %s\n", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), target)
		return nil
	})
	return b.String()
}

// limitedSession is a session over ws within lim, as one SFTP session of
// an SSH connection is.
func limitedSession(t *testing.T, ws fsops.Workspace, lim *ConnLimits) *sftpSession {
	t.Helper()
	s := &sftpSession{t, pipeServer(t, func(c net.Conn) error {
		return NewServer(t.Context(), ws, c, lim).Serve()
	})}
	s.do(sftpPacket(fxpInit, 3))
	return s
}

// TestAttackListingsHeld: OPENDIR holds the directory's whole listing
// until READDIR has sent it or the handle is closed. The entries a
// connection's open directory handles hold are bounded (DefaultMaxListed,
// and the server's DefaultServerListed), not just their number: without
// it, 1024 handles on one directory of 100,000 entries held about 20 GiB.
func TestAttackListingsHeld(t *testing.T) {
	ws := sftpTestWorkspace(t) // /many holds 150 entries
	server := NewBudget(400)
	lim := NewConnLimits(DefaultMaxHandles, 1, Shared{Listed: server})
	lim.listed.max = 320
	s := limitedSession(t, ws, lim)
	h1 := handleAnswer(t, s.do(sftpPacket(fxpOpendir, 1, "/many")))
	h2 := handleAnswer(t, s.do(sftpPacket(fxpOpendir, 2, "/many")))
	_, code, msg := sftpStatusOf(t, s.do(sftpPacket(fxpOpendir, 3, "/many")))
	if code != stFailure || !strings.Contains(msg, "320 entries per connection") {
		t.Fatalf("a third listing of 150 within 320: %d %q", code, msg)
	}
	if lim.listed.Held() != 300 || lim.handles.Held() != 2 {
		t.Fatalf("held: %d entries, %d handles; want 300, 2", lim.listed.Held(), lim.handles.Held())
	}
	// Small directories still open.
	hs := handleAnswer(t, s.do(sftpPacket(fxpOpendir, 4, "/dir")))
	// Read to the end, a listing holds nothing more, even before CLOSE.
	for a := s.do(sftpPacket(fxpReaddir, 5, h1)); a[4] == fxpName; a = s.do(sftpPacket(fxpReaddir, 5, h1)) {
	}
	if lim.listed.Held() != 152 || server.Held() != 152 {
		t.Fatalf("after reading one to the end: %d (server %d), want 152", lim.listed.Held(), server.Held())
	}
	h3 := handleAnswer(t, s.do(sftpPacket(fxpOpendir, 6, "/many")))
	// Another connection shares the server's budget only.
	other := limitedSession(t, ws, NewConnLimits(DefaultMaxHandles, 1, Shared{Listed: server}))
	_, code, msg = sftpStatusOf(t, other.do(sftpPacket(fxpOpendir, 7, "/many")))
	if code != stFailure || !strings.Contains(msg, "400 entries on this server") {
		t.Fatalf("over the server's budget: %d %q", code, msg)
	}
	for _, h := range []string{h1, h2, hs, h3} {
		s.do(sftpPacket(fxpClose, 8, h))
	}
	if lim.listed.Held() != 0 || server.Held() != 0 || lim.handles.Held() != 0 {
		t.Fatalf("after CLOSE: %d entries (server %d), %d handles", lim.listed.Held(), server.Held(), lim.handles.Held())
	}
	// A session that ends with listings open gives them back.
	handleAnswer(t, other.do(sftpPacket(fxpOpendir, 9, "/many")))
	other.c.Close()
	for i := 0; server.Held() != 0; i++ {
		if i == 1000 {
			t.Fatalf("the ended session still holds %d entries", server.Held())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAttackServerHandles: the open handles of all connections together
// are bounded (DefaultServerHandles), so that many connections at their
// own limit cannot use up the daemon's descriptors.
func TestAttackServerHandles(t *testing.T) {
	ws := sftpTestWorkspace(t)
	server := NewBudget(5)
	var sessions []*sftpSession
	for i := 0; i < 3; i++ {
		sessions = append(sessions, limitedSession(t, ws, NewConnLimits(2, 1, Shared{Handles: server})))
	}
	opened := 0
	var refused []string
	for _, s := range sessions {
		for j := 0; j < 2; j++ {
			a := s.do(sftpPacket(fxpOpen, 1, "/a.txt", fxfRead, 0))
			if a[4] == fxpHandle {
				opened++
				continue
			}
			_, _, msg := sftpStatusOf(t, a)
			refused = append(refused, msg)
		}
	}
	if opened != 5 || len(refused) != 1 || !strings.Contains(refused[0], "limit 5 for all connections") {
		t.Fatalf("%d opened, refused %q; want 5 and one refusal naming the server's limit", opened, refused)
	}
	sessions[0].c.Close()
	for i := 0; server.Held() != 3; i++ {
		if i == 1000 {
			t.Fatalf("the ended session's handles are still held: %d", server.Held())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if a := sessions[2].do(sftpPacket(fxpOpendir, 2, "/dir")); a[4] != fxpHandle {
		t.Fatalf("OPENDIR once handles are free: %q", a)
	}
}

// TestAttackSetstat: SETSTAT and FSETSTAT with setuid, setgid and sticky
// bits, a chown to root, extreme times and sizes, and on symlinks.
func TestAttackSetstat(t *testing.T) {
	ws, root, outside := attackTree(t)
	s := newSFTPSession(t, ws)
	a := filepath.Join(root, "a.txt")
	if code := statusCode(t, s.do(sftpPacket(fxpSetstat, 1, "/a.txt", attrPermissions, 0o7777))); code != stOK {
		t.Fatalf("SETSTAT 07777: %d", code)
	}
	if st, _ := os.Stat(a); st.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 || st.Mode().Perm() != 0o777 {
		t.Fatalf("SETSTAT 07777 made %v; want the permission bits only", st.Mode())
	}
	h := handleAnswer(t, s.do(sftpPacket(fxpOpen, 2, "/a.txt", fxfRead|fxfWrite, 0)))
	s.do(sftpPacket(fxpFsetstat, 3, h, attrPermissions, 0o6755))
	d := handleAnswer(t, s.do(sftpPacket(fxpOpendir, 4, "/dir")))
	s.do(sftpPacket(fxpFsetstat, 5, d, attrPermissions, 0o3777))
	if st, _ := os.Stat(a); st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Fatalf("FSETSTAT 06755 made %v", st.Mode())
	}
	if st, _ := os.Stat(filepath.Join(root, "dir")); st.Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
		t.Fatalf("FSETSTAT 03777 on a directory made %v", st.Mode())
	}
	// Ownership is never changed: UIDGID is accepted and ignored.
	owner := func() [2]uint32 {
		st, err := os.Stat(a)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		return [2]uint32{sys.Uid, sys.Gid}
	}
	before := owner()
	for _, id := range []uint32{0, 65534, math.MaxUint32} {
		if code := statusCode(t, s.do(sftpPacket(fxpSetstat, 6, "/a.txt", attrUIDGID, id, id))); code != stOK {
			t.Fatalf("SETSTAT uid %d: %d", id, code)
		}
		if after := owner(); after != before {
			t.Fatalf("SETSTAT uid %d changed the owner to %v", id, after)
		}
	}
	// Times: the whole uint32 range is a time.
	for _, tm := range []uint32{0, math.MaxUint32} {
		if code := statusCode(t, s.do(sftpPacket(fxpSetstat, 7, "/a.txt", attrACModTime, tm, tm))); code != stOK {
			t.Fatalf("SETSTAT time %d: %d", tm, code)
		}
		if st, _ := os.Stat(a); st.ModTime().Unix() != int64(tm) {
			t.Fatalf("mtime %d, want %d", st.ModTime().Unix(), tm)
		}
	}
	// Sizes past int64 are refused before the file system sees them, and
	// the file keeps its size.
	for _, size := range []uint64{1 << 63, math.MaxUint64} {
		for _, req := range [][]byte{
			sftpPacket(fxpSetstat, 8, "/a.txt", attrSize, size),
			sftpPacket(fxpFsetstat, 9, h, attrSize, size),
		} {
			if _, code, msg := sftpStatusOf(t, s.do(req)); code != stFailure || !strings.Contains(msg, "negative size") {
				t.Errorf("size %d: %d %q", size, code, msg)
			}
		}
	}
	if st, _ := os.Stat(a); st.Size() != 5 {
		t.Fatalf("size %d after the refused truncations", st.Size())
	}
	// The largest int64 is the file system's to refuse (EFBIG or EINVAL);
	// a file system that takes it makes a sparse file.
	if a := s.do(sftpPacket(fxpSetstat, 10, "/a.txt", attrSize, uint64(math.MaxInt64))); a[4] != fxpStatus {
		t.Fatalf("size 2^63-1: %q", a)
	}
	s.do(sftpPacket(fxpSetstat, 11, "/a.txt", attrSize, uint64(5)))
	// On a symlink: what it names is changed when inside; a link leading
	// out is refused, and the file outside keeps its mode and size.
	if code := statusCode(t, s.do(sftpPacket(fxpSetstat, 12, "/in", attrPermissions, 0o600))); code != stOK {
		t.Fatalf("SETSTAT through a link inside: %d", code)
	}
	for _, p := range []string{"/abs", "/out/secret"} {
		for _, attrs := range [][]any{{attrPermissions, 0o777}, {attrSize, uint64(0)}, {attrACModTime, 1, 1}} {
			if code := statusCode(t, s.do(sftpPacket(fxpSetstat, append([]any{13, p}, attrs...)...))); code != stPermissionDenied {
				t.Errorf("SETSTAT %s %v: %d", p, attrs, code)
			}
		}
	}
	// A handle's FSTAT and FSETSTAT judge its path again: the directory
	// replaced by a link leading out after OPEN reaches nothing outside.
	os.WriteFile(filepath.Join(root, "dir", "f"), []byte("f"), 0o644)
	hf := handleAnswer(t, s.do(sftpPacket(fxpOpen, 14, "/dir/f", fxfRead, 0)))
	os.Rename(filepath.Join(root, "dir"), filepath.Join(root, "dir.old"))
	os.WriteFile(filepath.Join(outside, "f"), []byte("outside f"), 0o644)
	os.Symlink(outside, filepath.Join(root, "dir"))
	if code := statusCode(t, s.do(sftpPacket(fxpFsetstat, 15, hf, attrPermissions|attrSize, uint64(0), 0o777))); code != stPermissionDenied {
		t.Errorf("FSETSTAT after the swap: %d", code)
	}
	if code := statusCode(t, s.do(sftpPacket(fxpFstat, 16, hf))); code != stPermissionDenied {
		t.Errorf("FSTAT after the swap: %d", code)
	}
	if st, err := os.Stat(filepath.Join(outside, "f")); err != nil || st.Size() != 9 || st.Mode().Perm() != 0o644 {
		t.Fatalf("the outside file was changed: %v %v", st, err)
	}
	os.Remove(filepath.Join(outside, "f"))
	outsideUntouched(t, outside)
}

// TestAttackOffsets: READ of any length at any offset, WRITE at offsets
// past int64 and at its largest value.
func TestAttackOffsets(t *testing.T) {
	ws := sftpTestWorkspace(t)
	s := newSFTPSession(t, ws)
	h := handleAnswer(t, s.do(sftpPacket(fxpOpen, 1, "/big", fxfRead|fxfWrite, 0)))
	// A READ of 4 GiB answers 32 KiB.
	if a := s.do(sftpPacket(fxpRead, 2, h, uint64(0), math.MaxUint32)); a[4] != fxpData || len(a) != dataHeaderLen+sftpMaxRead {
		t.Fatalf("READ of 2^32-1 bytes: %d bytes", len(a))
	}
	// Past int64, and at its largest (which pread refuses with EINVAL on
	// Linux), a READ fails; its message names the client's path, never the
	// host's (fsops.sysText).
	for _, off := range []uint64{math.MaxInt64, 1 << 63, math.MaxUint64} {
		if _, code, msg := sftpStatusOf(t, s.do(sftpPacket(fxpRead, 3, h, off, 10))); code != stFailure && code != stEOF ||
			!strings.Contains(msg, "/big") || strings.Contains(msg, ws.Root()) {
			t.Errorf("READ at %d: %d %q, want FAILURE or EOF naming /big only", off, code, msg)
		}
	}
	for _, off := range []uint64{math.MaxInt64, 1 << 63, math.MaxUint64} {
		if _, code, msg := sftpStatusOf(t, s.do(sftpPacket(fxpWrite, 4, h, off, "x"))); code != stFailure || strings.Contains(msg, ws.Root()) {
			t.Errorf("WRITE at %d: %d %q, want FAILURE naming no host path", off, code, msg)
		}
	}
	if st, _ := os.Stat(filepath.Join(ws.Root(), "big")); st.Size() != 40000 {
		t.Fatalf("size %d after the refused writes", st.Size())
	}
}

// blockingChannel is a client that sends in and never reads: its Write
// records each write's size and the buffer's capacity, and, once blocked
// is set, waits until release is closed and then fails, as a channel's
// write does when the client's window stays shut until it is closed.
type blockingChannel struct {
	r       io.Reader
	writes  []int
	maxCap  int
	block   int // block from this write on (counted from 1); 0: never
	release chan struct{}
	blocked chan struct{}
}

func (c *blockingChannel) Read(p []byte) (int, error) { return c.r.Read(p) }
func (c *blockingChannel) Write(p []byte) (int, error) {
	c.writes = append(c.writes, len(p))
	c.maxCap = max(c.maxCap, cap(p))
	if c.block > 0 && len(c.writes) >= c.block {
		close(c.blocked)
		<-c.release
		return 0, io.ErrClosedPipe
	}
	return len(p), nil
}

// TestAttackNeverReads: a client that pipelines requests and never reads
// the answers holds at most one write's worth of answers in the server
// (sftpFlushAt and the answer that crossed it), whatever it sends; when the
// channel's write fails the session ends and gives its handles back.
func TestAttackNeverReads(t *testing.T) {
	ws := sftpTestWorkspace(t)
	// Long names: a READDIR answer of 100 of them is the largest answer.
	for i := 0; i < 150; i++ {
		if err := ws.WriteFile(fmt.Sprintf("/long/%03d%s", i, strings.Repeat("n", 250)), nil); err != nil {
			t.Fatal(err)
		}
	}
	var in bytes.Buffer
	in.Write(sftpPacket(fxpInit, 3))
	in.Write(sftpPacket(fxpOpen, 1, "/big", fxfRead, 0))
	for i := 0; i < 3000; i++ {
		switch i % 3 {
		case 0:
			in.Write(sftpPacket(fxpRead, i, "1", uint64(0), math.MaxUint32))
		case 1:
			in.Write(sftpPacket(fxpOpendir, i, "/long"))
		case 2:
			in.Write(sftpPacket(fxpReaddir, i, strconv.Itoa(i/3+2)))
		}
		if i%3 == 2 {
			in.Write(sftpPacket(fxpClose, i, strconv.Itoa(i/3+2)))
		}
	}
	ch := &blockingChannel{r: bytes.NewReader(in.Bytes())}
	if err := newSFTPServer(ws, ch).Serve(); err != io.EOF {
		t.Fatalf("Serve: %v", err)
	}
	const largest = sftpFlushAt + 100*(2*(4+260)+200) // and one READDIR answer
	total := 0
	for _, n := range ch.writes {
		total += n
		if n > largest {
			t.Fatalf("a write of %d bytes, over %d", n, largest)
		}
	}
	if len(ch.writes) < total/largest || ch.maxCap > 2*largest {
		t.Fatalf("%d writes of %d bytes, buffer capacity up to %d", len(ch.writes), total, ch.maxCap)
	}

	// Blocked in a write, the session holds its handles; when the write
	// fails (the channel closed) it ends and gives them back.
	lim := NewConnLimits(DefaultMaxHandles, 1, Shared{})
	ch = &blockingChannel{r: bytes.NewReader(in.Bytes()), block: 3, release: make(chan struct{}), blocked: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- NewServer(t.Context(), ws, ch, lim).Serve() }()
	<-ch.blocked
	if lim.handles.Held() == 0 {
		t.Fatal("no handle held while blocked")
	}
	close(ch.release)
	if err := <-done; !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Serve: %v", err)
	}
	if lim.handles.Held() != 0 || lim.listed.Held() != 0 {
		t.Fatalf("after the end: %d handles, %d entries held", lim.handles.Held(), lim.listed.Held())
	}
}

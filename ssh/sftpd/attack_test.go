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
	"strings"
	"testing"

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
func serveBytes(ws fsops.Workspace, in []byte) (error, []byte) {
	ch := &fakeChannel{r: bytes.NewReader(in)}
	err := newSFTPServer(ws, ch).Serve()
	return err, ch.w.Bytes()
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
			err, out := serveBytes(ws, tc.in)
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
		err, out := serveBytes(ws, in)
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
	if err, out := serveBytes(sftpTestWorkspace(t), all); err != io.EOF || len(out) == 0 {
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
	lim := NewConnLimits(2, 1, nil)
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
	if n := lim.handles.Load(); n != 0 {
		t.Fatalf("%d handles counted, want 0", n)
	}
	handleAnswer(t, s.do(sftpPacket(fxpOpen, 5, "/a.txt", fxfRead, 0)))
	handleAnswer(t, s.do(sftpPacket(fxpOpen, 6, "/a.txt", fxfRead, 0)))
	if code := statusCode(t, s.do(sftpPacket(fxpOpen, 7, "/a.txt", fxfRead, 0))); code != stFailure {
		t.Fatalf("a third OPEN within a limit of 2: %d", code)
	}
}

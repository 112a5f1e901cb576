package sftpd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// Tests of our SFTP server at the packet level: against pkg/sftp's
// RequestServer (which served SFTP before) over the same handlers, on
// malformed input, and with pipelined requests.

// sftpPacket builds a request: type, then fields (uint32, uint64, string,
// or []byte appended raw).
func sftpPacket(typ byte, fields ...any) []byte {
	b := []byte{0, 0, 0, 0, typ}
	for _, f := range fields {
		switch v := f.(type) {
		case uint32:
			b = binary.BigEndian.AppendUint32(b, v)
		case int:
			b = binary.BigEndian.AppendUint32(b, uint32(v))
		case uint64:
			b = binary.BigEndian.AppendUint64(b, v)
		case string:
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		case []byte:
			b = append(b, v...)
		default:
			panic(fmt.Sprintf("sftpPacket: %T", f))
		}
	}
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// readSFTPPacket reads one whole packet, length included.
func readSFTPPacket(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("answer of %d bytes", n)
	}
	b := make([]byte, 4+n)
	copy(b, hdr[:])
	_, err := io.ReadFull(r, b[4:])
	return b, err
}

// --- pkg/sftp's request server over sftpHandlers: what the differential tests compare with ---

type pkgSFTP struct{ h *sftpHandlers }

// pkgErr gives pkg/sftp the status of one of our errors: it finds the code
// with errors.As on its own error type.
func pkgErr(err error) error {
	var se statusError
	if err == nil || err == io.EOF || !errors.As(err, &se) {
		return err
	}
	return pkgStatus{se}
}

type pkgStatus struct{ statusError }

func (e pkgStatus) Unwrap() error {
	switch e.code {
	case stNoSuchFile:
		return sftp.ErrSSHFxNoSuchFile
	case stPermissionDenied:
		return sftp.ErrSSHFxPermissionDenied
	case stOpUnsupported:
		return sftp.ErrSSHFxOpUnsupported
	case stEOF:
		return sftp.ErrSSHFxEOF
	}
	return sftp.ErrSSHFxFailure
}

type pkgFile struct{ f sftpFile }

func (p pkgFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := p.f.ReadAt(b, off)
	return n, pkgErr(err)
}
func (p pkgFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := p.f.WriteAt(b, off)
	return n, pkgErr(err)
}
func (p pkgFile) Close() error { return pkgErr(p.f.Close()) }

func (a pkgSFTP) open(r *sftp.Request) (pkgFile, error) {
	f, err := a.h.open(r.Filepath, r.Flags)
	if err != nil {
		return pkgFile{}, pkgErr(err)
	}
	return pkgFile{f}, nil
}

func (a pkgSFTP) Fileread(r *sftp.Request) (io.ReaderAt, error) { return a.open(r) }
func (a pkgSFTP) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	return a.open(r)
}
func (a pkgSFTP) OpenFile(r *sftp.Request) (sftp.WriterAtReaderAt, error) { return a.open(r) }

func (a pkgSFTP) Filecmd(r *sftp.Request) error {
	switch r.Method {
	case "Setstat":
		st := r.Attributes()
		return pkgErr(a.h.setstat(r.Filepath, sftpAttrs{flags: r.Flags, size: st.Size, uid: st.UID,
			gid: st.GID, perm: st.Mode, atime: st.Atime, mtime: st.Mtime}))
	case "Rename":
		return pkgErr(a.h.rename(r.Filepath, r.Target))
	case "Rmdir":
		return pkgErr(a.h.rmdir(r.Filepath))
	case "Mkdir":
		return pkgErr(a.h.mkdir(r.Filepath))
	case "Remove":
		return pkgErr(a.h.remove(r.Filepath))
	case "Symlink":
		return pkgErr(a.h.symlink(r.Filepath, r.Target))
	case "Link":
		return pkgErr(a.h.link())
	}
	return errors.New("unexpected " + r.Method)
}

func (a pkgSFTP) PosixRename(r *sftp.Request) error {
	return pkgErr(a.h.rename(r.Filepath, r.Target))
}

func (a pkgSFTP) StatVFS(r *sftp.Request) (*sftp.StatVFS, error) {
	st, err := a.h.statVFS(r.Filepath)
	if err != nil {
		return nil, pkgErr(err)
	}
	return &sftp.StatVFS{Bsize: st.BlockSize, Frsize: st.FragmentSize, Blocks: st.Blocks,
		Bfree: st.BlocksFree, Bavail: st.BlocksAvail, Files: st.Files, Ffree: st.FilesFree,
		Favail: st.FilesAvail, Namemax: st.NameMax}, nil
}

func (a pkgSFTP) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	switch r.Method {
	case "List":
		infos, err := a.h.list(r.Filepath)
		if err != nil {
			return nil, pkgErr(err)
		}
		l := make(pkgLister, len(infos))
		for i, info := range infos {
			l[i] = pkgInfo{info}
		}
		return l, nil
	case "Stat":
		info, err := a.h.stat(r.Filepath)
		if err != nil {
			return nil, pkgErr(err)
		}
		return pkgLister{pkgInfo{info}}, nil
	}
	return nil, errors.New("unexpected " + r.Method)
}

func (a pkgSFTP) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	info, err := a.h.lstat(r.Filepath)
	if err != nil {
		return nil, pkgErr(err)
	}
	return pkgLister{pkgInfo{info}}, nil
}

func (a pkgSFTP) Readlink(p string) (string, error) {
	t, err := a.h.readlink(p)
	return t, pkgErr(err)
}

func (a pkgSFTP) RealPath(p string) (string, error) {
	rp, err := a.h.realPath(p)
	return rp, pkgErr(err)
}

type pkgLister []os.FileInfo

func (l pkgLister) ListAt(out []os.FileInfo, off int64) (int, error) {
	if off >= int64(len(l)) {
		return 0, io.EOF
	}
	n := copy(out, l[off:])
	if off+int64(n) >= int64(len(l)) {
		return n, io.EOF
	}
	return n, nil
}

type pkgInfo struct{ i fsops.Info }

func (f pkgInfo) Name() string       { return f.i.Name }
func (f pkgInfo) Size() int64        { return f.i.Size }
func (f pkgInfo) Mode() fs.FileMode  { return f.i.Mode }
func (f pkgInfo) ModTime() time.Time { return f.i.ModTime }
func (f pkgInfo) IsDir() bool        { return f.i.IsDir() }
func (f pkgInfo) Sys() any           { return nil }
func (f pkgInfo) Uid() uint32        { return f.i.UID }
func (f pkgInfo) Gid() uint32        { return f.i.GID }

// --- fixtures ---

var (
	oldTime    = time.Date(2020, 3, 4, 5, 6, 7, 0, time.UTC)
	recentTime = time.Now().Add(-time.Hour).Truncate(time.Second)
)

// sftpTestWorkspace is a directory workspace with a few files, a directory of
// 150 entries (two READDIR batches), a symlink and fixed times.
func sftpTestWorkspace(t testing.TB) fsops.Workspace {
	ws, err := fsops.NewDir(t.TempDir(), fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ws.WriteFile("/a.txt", []byte("hello world")))
	must(ws.WriteFile("/big", bytes.Repeat([]byte("0123456789"), 4000)))
	must(ws.WriteFile("/dir/b", []byte("b")))
	must(ws.WriteFile("/dir/c", []byte("cc")))
	for i := 0; i < 150; i++ {
		must(ws.WriteFile(fmt.Sprintf("/many/f%03d", i), nil))
	}
	must(ws.Symlink("a.txt", "/lnk"))
	must(ws.Chmod("/dir/c", 0o4755))
	// Every time the answers carry is fixed: the two servers' workspaces
	// are made at different moments, maybe a second apart.
	for i := 0; i < 150; i++ {
		must(ws.Chtimes(fmt.Sprintf("/many/f%03d", i), oldTime, oldTime))
	}
	old := []unix.Timeval{unix.NsecToTimeval(oldTime.UnixNano()), unix.NsecToTimeval(oldTime.UnixNano())}
	must(unix.Lutimes(filepath.Join(ws.Root(), "lnk"), old))
	for _, p := range []string{"/a.txt", "/big", "/dir/b", "/dir", "/many", "/"} {
		must(ws.Chtimes(p, oldTime, oldTime))
	}
	must(ws.Chtimes("/dir/c", recentTime, recentTime))
	t.Cleanup(func() { ws.Close() })
	return ws
}

// pipeServer runs serve on one end of a net.Pipe and returns the other.
func pipeServer(t testing.TB, serve func(net.Conn) error) net.Conn {
	c, s := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- serve(s); s.Close() }()
	t.Cleanup(func() {
		c.Close()
		<-done
	})
	return c
}

func ourSFTP(ws fsops.Workspace) func(net.Conn) error {
	return func(c net.Conn) error { return newSFTPServer(ws, c).Serve() }
}

func pkgSFTPServer(ws fsops.Workspace) func(net.Conn) error {
	return func(c net.Conn) error {
		h := pkgSFTP{newSFTPHandlers(ws)}
		return sftp.NewRequestServer(c, sftp.Handlers{FileGet: h, FilePut: h, FileCmd: h, FileList: h},
			sftp.WithStartDirectory("/")).Serve()
	}
}

// sftpScript is a session of requests no client would find odd, with the
// error cases of each: handles are numbered from 1 in order of successful
// OPEN/OPENDIR, which both servers do as long as no OPEN fails before the
// last handle is used (failing OPENs are at the end).
func sftpScript() [][]byte {
	var s [][]byte
	add := func(typ byte, f ...any) { s = append(s, sftpPacket(typ, f...)) }
	id := uint32(0)
	next := func() uint32 { id++; return id }
	ext := func(name string, f ...any) { add(fxpExtended, append([]any{next(), name}, f...)...) }

	add(fxpInit, 3)
	for _, p := range []string{".", "", "/", "/../x/..", "/etc/../a.txt", "sub/dir", "../../etc"} {
		add(fxpRealpath, next(), p)
	}
	for _, p := range []string{"/a.txt", "a.txt", "../../a.txt", "/lnk", "/missing", "/dir", "/dir/c", "/", "/dir/b/x"} {
		add(fxpStat, next(), p)
		add(fxpLstat, next(), p)
	}
	// handle 1: reading
	add(fxpOpen, next(), "/a.txt", fxfRead, 0)
	add(fxpRead, next(), "1", uint64(0), 100) // short read
	add(fxpRead, next(), "1", uint64(6), 3)
	add(fxpRead, next(), "1", uint64(11), 10) // EOF
	add(fxpRead, next(), "1", uint64(50), 10) // EOF
	add(fxpRead, next(), "1", uint64(2), 0)   // empty
	add(fxpFstat, next(), "1")
	add(fxpClose, next(), "1")
	add(fxpClose, next(), "1") // closed
	add(fxpRead, next(), "1", uint64(0), 10)
	add(fxpWrite, next(), "1", uint64(0), "x")
	add(fxpFstat, next(), "1")
	add(fxpFsetstat, next(), "1", 0)
	add(fxpReaddir, next(), "zz")
	// handle 2: a read over the cap
	add(fxpOpen, next(), "/big", fxfRead, 0)
	add(fxpRead, next(), "2", uint64(0), 65536)
	add(fxpRead, next(), "2", uint64(39990), 65536)
	add(fxpClose, next(), "2")
	// handles 3, 4: directories
	add(fxpOpendir, next(), "/many")
	add(fxpReaddir, next(), "3")
	add(fxpReaddir, next(), "3")
	add(fxpReaddir, next(), "3")
	add(fxpReaddir, next(), "3")
	add(fxpClose, next(), "3")
	add(fxpOpendir, next(), "dir")
	add(fxpReaddir, next(), "4")
	add(fxpFstat, next(), "4")
	add(fxpReaddir, next(), "4")
	add(fxpClose, next(), "4")
	// handles 5, 6, 7: writing, read-write, append
	add(fxpOpen, next(), "/new/x.txt", fxfWrite|fxfCreat|fxfTrunc, 0)
	add(fxpWrite, next(), "5", uint64(0), "abc")
	add(fxpWrite, next(), "5", uint64(3), "def")
	add(fxpFsetstat, next(), "5", attrPermissions|attrACModTime, 0o600, uint32(oldTime.Unix()), uint32(oldTime.Unix()))
	add(fxpFstat, next(), "5")
	add(fxpClose, next(), "5")
	add(fxpOpen, next(), "/new/x.txt", fxfRead|fxfWrite, 0)
	add(fxpWrite, next(), "6", uint64(1), "BC")
	add(fxpRead, next(), "6", uint64(0), 100)
	add(fxpClose, next(), "6")
	add(fxpOpen, next(), "/new/x.txt", fxfWrite|fxfAppend, 0)
	add(fxpWrite, next(), "7", uint64(0), "zz")
	add(fxpClose, next(), "7")
	add(fxpSetstat, next(), "/new/x.txt", attrACModTime|attrUIDGID, 1, 2, uint32(oldTime.Unix()), uint32(oldTime.Unix()))
	add(fxpStat, next(), "/new/x.txt")
	add(fxpSetstat, next(), "/a.txt", attrSize, uint64(5))
	add(fxpSetstat, next(), "/a.txt", attrPermissions, 0o640)
	add(fxpSetstat, next(), "/a.txt", attrACModTime, uint32(oldTime.Unix()), uint32(oldTime.Unix()))
	add(fxpStat, next(), "/a.txt")
	add(fxpSetstat, next(), "/missing", attrPermissions, 0o640)
	// commands
	add(fxpMkdir, next(), "/m", 0)
	add(fxpMkdir, next(), "/m", 0)
	add(fxpMkdir, next(), "/no/such/m", 0)
	add(fxpRmdir, next(), "/m")
	add(fxpRmdir, next(), "/")
	add(fxpRmdir, next(), "..")
	add(fxpRmdir, next(), "/a.txt")
	add(fxpRmdir, next(), "/nope")
	add(fxpRmdir, next(), "/dir")
	add(fxpRemove, next(), "/dir")
	add(fxpRemove, next(), "/nope")
	add(fxpRename, next(), "/dir/b", "/dir/c")
	add(fxpRename, next(), "/nope", "/x")
	add(fxpRename, next(), "/dir/c", "/d2/c")
	ext("posix-rename@openssh.com", "/d2/c", "/dir/b")
	ext("posix-rename@openssh.com", "/nope", "/dir/b")
	ext("hardlink@openssh.com", "/a.txt", "/h")
	ext("statvfs@openssh.com", "/nope")
	ext("fstatvfs@openssh.com", "1")
	ext("fsync@openssh.com", "1")
	ext("foo@example.com")
	add(fxpSymlink, next(), "a.txt", "/s2")
	add(fxpReadlink, next(), "/s2")
	add(fxpReadlink, next(), "/lnk")
	add(fxpReadlink, next(), "/a.txt")
	add(fxpReadlink, next(), "/nope")
	add(fxpSymlink, next(), "a.txt", "/s2")
	add(fxpSymlink, next(), "/../../../etc/passwd", "/s3")
	add(fxpRemove, next(), "/s2")
	// OPENs that fail
	add(fxpOpen, next(), "/missing", fxfRead, 0)
	add(fxpOpen, next(), "/a.txt", 0, 0)
	add(fxpOpen, next(), "/a.txt", fxfExcl, 0)
	add(fxpOpen, next(), "/a.txt", fxfWrite|fxfCreat|fxfExcl, 0)
	add(fxpOpen, next(), "/dir", fxfRead, 0)
	add(fxpOpendir, next(), "/missing")
	add(fxpOpendir, next(), "/a.txt")
	return s
}

// TestSFTPMatchesPkgSFTP runs the same session against pkg/sftp's request
// server and ours, each on a fresh copy of the workspace, and compares the
// raw answers.
// oneByOne sends each request on c and reads its answer before sending
// the next, so the server never has a request buffered.
func oneByOne(t *testing.T, c net.Conn, reqs [][]byte) [][]byte {
	t.Helper()
	var answers [][]byte
	for _, req := range reqs {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		a, err := readSFTPPacket(c)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, a)
	}
	return answers
}

func TestSFTPMatchesPkgSFTP(t *testing.T) {
	script := sftpScript()
	run := func(serve func(fsops.Workspace) func(net.Conn) error) [][]byte {
		return oneByOne(t, pipeServer(t, serve(sftpTestWorkspace(t))), script)
	}
	want, got := run(pkgSFTPServer), run(ourSFTP)
	for i := range script {
		w, g := want[i], got[i]
		if w[4] == fxpExtendedReply && g[4] == fxpExtendedReply && len(w) == len(g) {
			continue // statvfs: the free counts may move between the two runs
		}
		if !bytes.Equal(w, g) {
			t.Errorf("request %d (type %d): answers differ\npkg/sftp: %q\nours:     %q", i, script[i][4], w, g)
		}
	}
}

// sftpSession is a raw client of our server.
type sftpSession struct {
	t testing.TB
	c net.Conn
}

func newSFTPSession(t testing.TB, ws fsops.Workspace) *sftpSession {
	s := &sftpSession{t, pipeServer(t, ourSFTP(ws))}
	if a := s.do(sftpPacket(fxpInit, 3)); a[4] != fxpVersion {
		t.Fatalf("INIT answered %q", a)
	}
	return s
}

func (s *sftpSession) do(req []byte) []byte {
	s.t.Helper()
	if _, err := s.c.Write(req); err != nil {
		s.t.Fatal(err)
	}
	a, err := readSFTPPacket(s.c)
	if err != nil {
		s.t.Fatal(err)
	}
	return a
}

// status decodes a STATUS answer.
func sftpStatusOf(t testing.TB, a []byte) (id, code uint32, msg string) {
	t.Helper()
	if len(a) < 13 || a[4] != fxpStatus {
		t.Fatalf("not a STATUS: %q", a)
	}
	d := sftpDecoder{b: a[5:]}
	id, code, msg = d.u32(), d.u32(), d.str()
	return id, code, msg
}

// ended reports whether the server closed the session without answering.
func (s *sftpSession) ended(req []byte) bool {
	s.t.Helper()
	go s.c.Write(req) //nolint:errcheck // may fail once the server is gone
	s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := readSFTPPacket(s.c)
	return err == io.EOF || errors.Is(err, io.ErrClosedPipe)
}

func TestSFTPMalformed(t *testing.T) {
	ws := sftpTestWorkspace(t)
	trunc := func(p []byte, n int) []byte {
		p = append([]byte(nil), p[:len(p)-n]...)
		binary.BigEndian.PutUint32(p, uint32(len(p)-4))
		return p
	}
	for _, tc := range []struct {
		name string
		req  []byte
	}{
		{"length 0", []byte{0, 0, 0, 0}},
		{"length over 256 KiB", []byte{0, 4, 0, 1, fxpStat}},
		{"no id", sftpPacket(fxpStat)},
		{"short id", sftpPacket(fxpStat, []byte{0, 1})},
		{"path longer than the packet", trunc(sftpPacket(fxpStat, 7, "/a.txt"), 2)},
		{"string length 4 GiB", sftpPacket(fxpOpen, 7, []byte{0xff, 0xff, 0xff, 0xff})},
		{"open without pflags", sftpPacket(fxpOpen, 7, "/a.txt")},
		{"read without length", trunc(sftpPacket(fxpRead, 7, "1", uint64(0), 10), 4)},
		{"write data longer than the packet", trunc(sftpPacket(fxpWrite, 7, "1", uint64(0), "abcdef"), 3)},
		{"setstat attrs cut", sftpPacket(fxpSetstat, 7, "/a.txt", attrSize, []byte{0, 0, 0})},
		{"setstat extended count too large", sftpPacket(fxpSetstat, 7, "/a.txt", attrExtended, 1000)},
		{"mkdir without attrs", sftpPacket(fxpMkdir, 7, "/m")},
		{"rename without target", sftpPacket(fxpRename, 7, "/a.txt")},
		{"extended without name", sftpPacket(fxpExtended, 7)},
		{"posix-rename without target", sftpPacket(fxpExtended, 7, "posix-rename@openssh.com", "/a")},
		{"init with half an extension", sftpPacket(fxpInit, 3, "name")},
		{"unknown type without id", sftpPacket(99)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSFTPSession(t, ws)
			if !s.ended(tc.req) {
				t.Fatal("the session goes on after a malformed packet")
			}
		})
	}
}

func TestSFTPUnknownRequests(t *testing.T) {
	s := newSFTPSession(t, sftpTestWorkspace(t))
	for _, tc := range []struct {
		name string
		req  []byte
		code uint32
		msg  string
	}{
		{"unknown type", sftpPacket(99, 41), stOpUnsupported, "operation unsupported"},
		{"response type", sftpPacket(fxpStatus, 42, 0, "", ""), stOpUnsupported, "operation unsupported"},
		{"unknown extension", sftpPacket(fxpExtended, 43, "foo@example.com", "x"), stOpUnsupported, "operation unsupported"},
		{"hardlink", sftpPacket(fxpExtended, 44, "hardlink@openssh.com", "/a.txt", "/h"), stOpUnsupported, "hard links are not supported"},
		{"read unknown handle", sftpPacket(fxpRead, 45, "99", uint64(0), 10), stFailure, "bad file descriptor"},
		{"write unknown handle", sftpPacket(fxpWrite, 46, "x", uint64(0), "abc"), stFailure, "bad file descriptor"},
		{"close unknown handle", sftpPacket(fxpClose, 47, ""), stFailure, "bad file descriptor"},
		{"readdir unknown handle", sftpPacket(fxpReaddir, 48, "1"), stFailure, "bad file descriptor"},
	} {
		id, code, msg := sftpStatusOf(t, s.do(tc.req))
		if id != binary.BigEndian.Uint32(tc.req[5:]) || code != tc.code || msg != tc.msg {
			t.Errorf("%s: got id %d, %d %q; want %d %q", tc.name, id, code, msg, tc.code, tc.msg)
		}
	}
	// Still serving.
	if a := s.do(sftpPacket(fxpStat, 50, "/a.txt")); a[4] != fxpAttrs {
		t.Fatalf("STAT after the unknown requests: %q", a)
	}
}

func TestSFTPHandleCap(t *testing.T) {
	s := newSFTPSession(t, sftpTestWorkspace(t))
	var last string
	for i := 0; i < DefaultMaxHandles; i++ {
		a := s.do(sftpPacket(fxpOpen, i, "/a.txt", fxfRead, 0))
		if a[4] != fxpHandle {
			t.Fatalf("OPEN %d: %q", i, a)
		}
		d := sftpDecoder{b: a[9:]}
		last = d.str()
	}
	_, code, msg := sftpStatusOf(t, s.do(sftpPacket(fxpOpen, 5000, "/a.txt", fxfRead, 0)))
	if code != stFailure || !strings.Contains(msg, "too many open handles") {
		t.Fatalf("OPEN past the cap: %d %q", code, msg)
	}
	_, code, _ = sftpStatusOf(t, s.do(sftpPacket(fxpOpendir, 5001, "/")))
	if code != stFailure {
		t.Fatalf("OPENDIR past the cap: %d", code)
	}
	if _, code, _ := sftpStatusOf(t, s.do(sftpPacket(fxpClose, 5002, last))); code != stOK {
		t.Fatalf("CLOSE: %d", code)
	}
	if a := s.do(sftpPacket(fxpOpendir, 5003, "/")); a[4] != fxpHandle {
		t.Fatalf("OPENDIR after a CLOSE: %q", a)
	}
}

// TestSFTPPipelinedOrder sends many requests before reading any answer, as
// clients do for transfers, and checks the answers come back in order.
func TestSFTPPipelinedOrder(t *testing.T) {
	s := newSFTPSession(t, sftpTestWorkspace(t))
	a := s.do(sftpPacket(fxpOpen, 1, "/big", fxfRead, 0))
	h := string(a[13:])
	const n = 600
	var reqs bytes.Buffer
	for i := 0; i < n; i++ {
		id := uint32(1000 + i)
		switch i % 4 {
		case 0:
			reqs.Write(sftpPacket(fxpRead, id, h, uint64(i*16), 4096))
		case 1:
			reqs.Write(sftpPacket(fxpStat, id, "/a.txt"))
		case 2:
			reqs.Write(sftpPacket(fxpStat, id, "/missing"))
		case 3:
			reqs.Write(sftpPacket(fxpRead, id, h, uint64(1<<40), 10))
		}
	}
	errc := make(chan error, 1)
	go func() { _, err := s.c.Write(reqs.Bytes()); errc <- err }()
	for i := 0; i < n; i++ {
		a, err := readSFTPPacket(s.c)
		if err != nil {
			t.Fatal(err)
		}
		if id := binary.BigEndian.Uint32(a[5:]); id != uint32(1000+i) {
			t.Fatalf("answer %d has id %d", i, id)
		}
		want := []byte{fxpData, fxpAttrs, fxpStatus, fxpStatus}[i%4]
		if a[4] != want {
			t.Fatalf("answer %d is of type %d, want %d", i, a[4], want)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// fakeChannel is a channel whose input is fixed and whose output is kept.
type fakeChannel struct {
	r io.Reader
	w bytes.Buffer
}

func (f *fakeChannel) Read(p []byte) (int, error)  { return f.r.Read(p) }
func (f *fakeChannel) Write(p []byte) (int, error) { return f.w.Write(p) }

// FuzzSFTPPacket feeds arbitrary bytes to the server as the client's
// stream: it must not panic or hang, and answer each request at most once,
// in order, with the request's id.
func FuzzSFTPPacket(f *testing.F) {
	for _, p := range sftpScript() {
		f.Add(p)
	}
	var all []byte
	for _, p := range sftpScript() {
		all = append(all, p...)
	}
	f.Add(all)
	// Every request type, extension and attribute flag (attack_test.go).
	for _, r := range attackRequests() {
		f.Add(r.packet())
	}
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0, 4, 0, 1, fxpStat})
	ws := sftpTestWorkspace(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		ch := &fakeChannel{r: bytes.NewReader(in)}
		_ = newSFTPServer(ws, ch).Serve()

		// The requests the input frames, in order, up to the first that is
		// cut short.
		var ids []uint32
		var types []byte
		for b := in; len(b) >= 4; {
			n := binary.BigEndian.Uint32(b)
			if n == 0 || n > sftpMaxPacket || uint64(len(b)-4) < uint64(n) {
				break
			}
			pkt := b[4 : 4+n]
			b = b[4+n:]
			types = append(types, pkt[0])
			if len(pkt) >= 5 {
				ids = append(ids, binary.BigEndian.Uint32(pkt[1:]))
			} else {
				ids = append(ids, 0)
			}
		}
		out := ch.w.Bytes()
		for i := 0; len(out) > 0; i++ {
			if len(out) < 9 {
				t.Fatalf("answer %d cut short: %q", i, out)
			}
			n := binary.BigEndian.Uint32(out)
			if uint64(n) > uint64(len(out)-4) || n < 5 {
				t.Fatalf("answer %d: bad length %d", i, n)
			}
			if i >= len(ids) {
				t.Fatalf("more answers than requests (%d)", len(ids))
			}
			a := out[4 : 4+n]
			out = out[4+n:]
			if types[i] == fxpInit {
				if a[0] != fxpVersion {
					t.Fatalf("INIT answered with type %d", a[0])
				}
				continue
			}
			if id := binary.BigEndian.Uint32(a[1:]); id != ids[i] {
				t.Fatalf("answer %d has id %d, request %d", i, id, ids[i])
			}
		}
	})
}

// BenchmarkSFTPServerPipe is open+read+close of a 4 KiB file (three round
// trips) against pkg/sftp's request server and ours, over net.Pipe with a
// raw client: the servers' own cost, without SSH or WebSocket.
func BenchmarkSFTPServerPipe(b *testing.B) {
	for _, tc := range []struct {
		name  string
		serve func(fsops.Workspace) func(net.Conn) error
	}{{"pkgsftp", pkgSFTPServer}, {"ours", ourSFTP}} {
		b.Run(tc.name, func(b *testing.B) {
			ws := sftpTestWorkspace(b)
			if err := ws.WriteFile("/4k", bytes.Repeat([]byte("x"), 4096)); err != nil {
				b.Fatal(err)
			}
			c := pipeServer(b, tc.serve(ws))
			do := func(req []byte) []byte {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				a, err := readSFTPPacket(c)
				if err != nil {
					b.Fatal(err)
				}
				return a
			}
			do(sftpPacket(fxpInit, 3))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a := do(sftpPacket(fxpOpen, 1, "/4k", fxfRead, 0))
				h := string(a[13:])
				if a := do(sftpPacket(fxpRead, 2, h, uint64(0), 32768)); a[4] != fxpData {
					b.Fatalf("READ: %q", a[:13])
				}
				do(sftpPacket(fxpClose, 3, h))
			}
		})
	}
}

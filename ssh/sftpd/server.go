package sftpd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// Server serves one SFTP session (one "sftp" subsystem channel) on the
// goroutine that calls Serve: it reads a request and handles it before
// reading the next, so answers go out in request order and a request costs
// no goroutine hand-off. Answers wait to be written together while the next
// request is already buffered, up to sftpFlushAt bytes, and are written
// before Serve reads anything it would wait for. pkg/sftp's RequestServer moves every
// request from its reader to a dispatcher, a worker and an ordering
// controller before the answer is sent: four wake-ups of other goroutines
// per round trip, which on a busy two-core machine are most of a small
// operation's server time (docs/architecture.md; TestSFTPMatchesPkgSFTP is
// the differential test).
//
// Answers are byte-for-byte those pkg/sftp's RequestServer (v1.13) gives
// for every request a client sends (VERSION's extensions, STATUS codes and
// messages, ATTRS, READDIR's longnames and batches of 100, READ capped at
// 32 KiB). Where pkg/sftp answers a request no client sends oddly, we
// answer plainly:
//
//   - a packet type we do not know is answered OP_UNSUPPORTED (pkg/sftp
//     ends the session);
//   - READ, WRITE and READDIR on a handle of the wrong kind (a directory's,
//     or READDIR on a file's) are FAILURE (pkg/sftp reads into or writes
//     from the wrong buffer, or lists the directory);
//   - WRITE on a handle opened read-only, or READ on one opened write-only,
//     fail as the file does (EBADF, FAILURE; pkg/sftp reads into the
//     WRITE's data, or writes zeros);
//   - SETSTAT attributes that do not fit in the packet end the session like
//     any malformed packet (pkg/sftp dereferences nil and crashes);
//   - more than the connection's handle limit (DefaultMaxHandles) open
//     handles are refused (FAILURE).
//
// A malformed packet (a field longer than what is left, a length of 0 or
// over sftpMaxPacket) ends the session, as with pkg/sftp and OpenSSH.
//
// Every request holds a file-operation slot of its connection and of the
// server while it is served (ConnLimits.enter), so the requests in the file
// system at once, and the OS threads they can pin there, are bounded. A
// request that never comes back from the kernel (a hung network or FUSE
// file system) cannot be interrupted; when its channel closes, abandon lets
// the session end without it, and this goroutine closes the session's
// handles whenever the kernel lets it go.
type Server struct {
	h   *sftpHandlers
	rw  io.ReadWriter
	r   *bufio.Reader
	in  []byte // the request being served
	out sftpEncoder

	handles map[string]*sftpHandle
	next    uint64 // OPEN and OPENDIR requests so far: the last handle's number

	lim    *ConnLimits
	ctx    context.Context // ends when the session is abandoned or the connection ends
	cancel context.CancelFunc

	mu        sync.Mutex
	inFS      bool // serving a request or closing handles: maybe in the kernel
	abandoned bool
}

// sftpHandle is an open file (f) or directory (dir).
type sftpHandle struct {
	key  string // the handle string the client was given
	path string // cleaned, as the client opened it
	f    sftpFile
	dir  bool
	ents []fsops.Info // a directory's entries not yet sent
	// listed is how many entries the listing holds against the limits
	// (ConnLimits.takeListed): all of them until READDIR sent the last.
	listed int
}

// Serve serves SFTP on rw (one side of an "sftp" subsystem channel, or any
// byte stream) over ws until the client ends it, as a connection of its own:
// the default handle limit, one request at a time, no server-wide slots. It
// returns nil or io.EOF when the client closed the stream.
func Serve(ws fsops.Workspace, rw io.ReadWriter) error { return newSFTPServer(ws, rw).Serve() }

// ServeContext is Serve for one SFTP session of an SSH connection: within
// the connection's limits (shared by its sessions) and until ctx (the
// connection's) ends. To abandon a session whose request is stuck in the
// kernel, use NewServer and Server.Abandon.
func ServeContext(ctx context.Context, ws fsops.Workspace, rw io.ReadWriter, lim *ConnLimits) error {
	return NewServer(ctx, ws, rw, lim).Serve()
}

// newSFTPServer serves ws on rw as a connection of its own (its own handle
// limit, no server-wide slots).
func newSFTPServer(ws fsops.Workspace, rw io.ReadWriter) *Server {
	return NewServer(context.Background(), ws, rw, NewConnLimits(DefaultMaxHandles, 1, Shared{}))
}

// NewServer makes the server of one SFTP session on rw, within the
// connection's limits lim, until ctx (the connection's) ends; Serve runs it.
func NewServer(ctx context.Context, ws fsops.Workspace, rw io.ReadWriter, lim *ConnLimits) *Server {
	ctx, cancel := context.WithCancel(ctx)
	return &Server{
		h:       newSFTPHandlers(ws),
		rw:      rw,
		r:       bufio.NewReaderSize(rw, 16<<10),
		handles: make(map[string]*sftpHandle),
		lim:     lim,
		ctx:     ctx,
		cancel:  cancel,
	}
}

var ErrAbandoned = errors.New("sftp: session abandoned")

// Abandon tells the server its channel is gone and nobody waits for it: a
// request waiting for a slot gives up, and the server stops after the one
// it is serving. It reports whether a request (or the final closing of the
// handles) may still be in the file system, in which case the caller should
// not wait for the server to return.
func (s *Server) Abandon() (inFS bool) {
	s.mu.Lock()
	s.abandoned = true
	inFS = s.inFS
	s.mu.Unlock()
	s.cancel()
	return inFS
}

// begin marks a request in progress and takes its slots.
func (s *Server) begin() error {
	s.mu.Lock()
	if s.abandoned {
		s.mu.Unlock()
		return ErrAbandoned
	}
	s.inFS = true
	s.mu.Unlock()
	return s.lim.enter(s.ctx)
}

// end gives the slots back; after abandon the session stops.
func (s *Server) end() error {
	s.lim.leave()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFS = false
	if s.abandoned {
		return ErrAbandoned
	}
	return nil
}

var (
	ErrMalformed     = errors.New("sftp: malformed packet")
	ErrPacketTooLong = errors.New("sftp: packet too long")
)

// Serve runs until the client closes the channel (io.EOF), a packet is
// malformed, or an answer cannot be written. Every handle still open is
// closed on the way out.
func (s *Server) Serve() error {
	defer s.closeAll()
	err := s.serve()
	if s.out.at > 0 {
		_ = s.flush() // the answers to the requests before the end
	}
	return err
}

func (s *Server) serve() error {
	var hdr [4]byte
	for {
		// Answers wait while the next request has begun to arrive, up to
		// sftpFlushAt bytes; they go out before anything that could wait
		// for the client.
		if s.out.at > 0 && (s.out.at >= sftpFlushAt || s.r.Buffered() < len(hdr)) {
			if err := s.flush(); err != nil {
				return err
			}
		}
		if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n == 0 {
			return fmt.Errorf("%w: length 0", ErrMalformed)
		}
		if n > sftpMaxPacket {
			return fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrPacketTooLong, n, sftpMaxPacket)
		}
		if uint32(cap(s.in)) < n {
			s.in = make([]byte, n)
		}
		s.in = s.in[:n]
		if _, err := io.ReadFull(s.r, s.in); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		// The answer is the last packet in s.out; it waits there.
		var err error
		if s.in[0] == fxpInit { // touches no file
			_, err = s.handle(s.in[0], s.in[1:])
		} else {
			if err := s.begin(); err != nil {
				return err
			}
			_, err = s.handle(s.in[0], s.in[1:])
			if eerr := s.end(); err == nil {
				err = eerr
			}
		}
		if err != nil {
			return err
		}
		s.out.keep()
	}
}

// flush sends the answers waiting, in one write.
func (s *Server) flush() error {
	_, err := s.rw.Write(s.out.take())
	return err
}

// closeAll closes every handle still open. A close can wait on the file
// system too (a network file system flushes), so it counts as in it.
func (s *Server) closeAll() {
	s.mu.Lock()
	s.inFS = len(s.handles) > 0
	s.mu.Unlock()
	s.cancel()
	for k, hd := range s.handles {
		if hd.f != nil {
			_ = hd.f.Close()
		}
		delete(s.handles, k)
		s.release(hd)
	}
}

// release gives back what hd held of the limits: its handle, and the
// entries of a listing not read to the end.
func (s *Server) release(hd *sftpHandle) {
	s.lim.dropHandle()
	s.lim.dropListed(hd.listed)
	hd.listed, hd.ents = 0, nil
}

// cleanPath puts a client path in the SFTP view: lexically cleaned against
// "/", so ".." stops at the root, as pkg/sftp's cleanPathWithBase("/", p)
// did.
func cleanPath(p string) string {
	p = path.Clean(p)
	if !path.IsAbs(p) {
		return path.Join("/", p)
	}
	return p
}

// status encodes err as a STATUS answer (OK when nil).
func (s *Server) status(id uint32, err error) []byte {
	if err == nil {
		s.out.status(id, stOK, "")
		return s.out.finish()
	}
	var code uint32 = stFailure
	var se statusError
	if errors.As(err, &se) {
		code = se.code
	}
	s.out.status(id, code, err.Error())
	return s.out.finish()
}

// Answers pkg/sftp gave for conditions of its own, kept word for word.
var (
	errBadHandle = statusError{stFailure, "bad file descriptor"} // EBADF
	errFxEOF     = statusError{stEOF, "EOF"}
	errFxUnsupp  = statusError{stOpUnsupported, "operation unsupported"}
)

// handle serves one request and returns its answer, or an error that ends
// the session (a malformed packet).
func (s *Server) handle(typ byte, body []byte) ([]byte, error) {
	d := sftpDecoder{b: body}
	if typ == fxpInit {
		d.u32() // the client's version: we speak 3 whatever it says
		for len(d.b) > 0 && !d.bad {
			d.bytes()
			d.bytes()
		}
		if d.bad {
			return nil, ErrMalformed
		}
		s.out.start(fxpVersion, 3)
		for _, e := range sftpExtensions {
			s.out.str(e.name)
			s.out.str(e.data)
		}
		return s.out.finish(), nil
	}
	id := d.u32()
	if d.bad {
		return nil, ErrMalformed
	}
	switch typ {
	case fxpRead:
		hd, off, n := s.handleOf(&d), d.u64(), d.u32()
		if d.bad {
			return nil, ErrMalformed
		}
		return s.read(id, hd, off, n), nil

	case fxpWrite:
		hd, off, data := s.handleOf(&d), d.u64(), d.bytes()
		if d.bad {
			return nil, ErrMalformed
		}
		switch {
		case hd == nil:
			return s.status(id, errBadHandle), nil
		case hd.f == nil:
			return s.status(id, statusError{stFailure, "write on a directory handle"}), nil
		}
		_, err := hd.f.WriteAt(data, int64(off))
		return s.status(id, err), nil

	case fxpOpen:
		p, pflags := d.str(), d.u32()
		d.attrs(d.u32()) // decoded (cut ones are malformed), then ignored
		if d.bad {
			return nil, ErrMalformed
		}
		s.next++ // as pkg/sftp, a number is used up even if OPEN fails
		if err := s.lim.takeHandle(); err != nil {
			return s.status(id, err), nil
		}
		f, err := s.h.open(cleanPath(p), pflags)
		if err != nil {
			s.lim.dropHandle()
			return s.status(id, err), nil
		}
		return s.newHandle(id, &sftpHandle{path: cleanPath(p), f: f}), nil

	case fxpClose:
		hd, key := s.handleKey(&d)
		if d.bad {
			return nil, ErrMalformed
		}
		if hd == nil {
			return s.status(id, errBadHandle), nil
		}
		delete(s.handles, key)
		s.release(hd)
		var err error
		if hd.f != nil {
			err = hd.f.Close()
		}
		return s.status(id, err), nil

	case fxpOpendir:
		p := cleanPath(d.str())
		if d.bad {
			return nil, ErrMalformed
		}
		s.next++
		if err := s.lim.takeHandle(); err != nil {
			return s.status(id, err), nil
		}
		ents, err := s.h.list(p)
		if err == nil {
			err = s.lim.takeListed(len(ents))
		}
		if err != nil {
			s.lim.dropHandle()
			return s.status(id, err), nil
		}
		return s.newHandle(id, &sftpHandle{path: p, dir: true, ents: ents, listed: len(ents)}), nil

	case fxpReaddir:
		hd := s.handleOf(&d)
		if d.bad {
			return nil, ErrMalformed
		}
		switch {
		case hd == nil:
			return s.status(id, errBadHandle), nil
		case !hd.dir:
			return s.status(id, statusError{stFailure, "readdir on a file handle"}), nil
		case len(hd.ents) == 0:
			return s.status(id, errFxEOF), nil
		}
		batch := hd.ents[:min(len(hd.ents), sftpReaddirBatch)]
		hd.ents = hd.ents[len(batch):]
		now := time.Now()
		s.out.start(fxpName, id)
		s.out.u32(uint32(len(batch)))
		for _, e := range batch {
			s.out.str(e.Name)
			s.out.str(longname(e, now))
			s.out.attrs(e)
		}
		if len(hd.ents) == 0 {
			// The listing is all sent: what it held is free.
			s.lim.dropListed(hd.listed)
			hd.listed, hd.ents = 0, nil
		}
		return s.out.finish(), nil

	case fxpStat, fxpLstat:
		p := cleanPath(d.str())
		if d.bad {
			return nil, ErrMalformed
		}
		stat := s.h.stat
		if typ == fxpLstat {
			stat = s.h.lstat
		}
		info, err := stat(p)
		return s.attrsAnswer(id, info, err), nil

	case fxpFstat:
		hd := s.handleOf(&d)
		if d.bad {
			return nil, ErrMalformed
		}
		if hd == nil {
			return s.status(id, errBadHandle), nil
		}
		info, err := s.h.stat(hd.path)
		return s.attrsAnswer(id, info, err), nil

	case fxpSetstat:
		p := cleanPath(d.str())
		a := d.attrs(d.u32())
		if d.bad {
			return nil, ErrMalformed
		}
		return s.status(id, s.h.setstat(p, a)), nil

	case fxpFsetstat:
		hd := s.handleOf(&d)
		a := d.attrs(d.u32())
		if d.bad {
			return nil, ErrMalformed
		}
		if hd == nil {
			return s.status(id, errBadHandle), nil
		}
		return s.status(id, s.h.setstat(hd.path, a)), nil

	case fxpRemove, fxpRmdir, fxpMkdir:
		p := cleanPath(d.str())
		if typ == fxpMkdir {
			d.attrs(d.u32()) // decoded (cut ones are malformed), then ignored
		}
		if d.bad {
			return nil, ErrMalformed
		}
		var err error
		switch typ {
		case fxpRemove:
			err = s.h.remove(p)
		case fxpRmdir:
			err = s.h.rmdir(p)
		default:
			err = s.h.mkdir(p)
		}
		return s.status(id, err), nil

	case fxpRealpath:
		p := d.str() // raw: realPath does its own canonicalization
		if d.bad {
			return nil, ErrMalformed
		}
		rp, err := s.h.realPath(p)
		if err != nil {
			return s.status(id, err), nil
		}
		return s.nameAnswer(id, rp), nil

	case fxpReadlink:
		p := cleanPath(d.str())
		if d.bad {
			return nil, ErrMalformed
		}
		target, err := s.h.readlink(p)
		if err != nil {
			return s.status(id, err), nil
		}
		return s.nameAnswer(id, target), nil

	case fxpRename:
		src, dst := d.str(), d.str()
		if d.bad {
			return nil, ErrMalformed
		}
		return s.status(id, s.h.rename(cleanPath(src), cleanPath(dst))), nil

	case fxpSymlink:
		// OpenSSH (and so every client) sends the link's target first and
		// the new link second, the reverse of the draft: see OpenSSH's
		// PROTOCOL, section 4.1. The target is the link's content, not
		// cleaned.
		target, link := d.str(), d.str()
		if d.bad {
			return nil, ErrMalformed
		}
		return s.status(id, s.h.symlink(target, cleanPath(link))), nil

	case fxpExtended:
		return s.extended(id, &d)
	}
	return s.status(id, errFxUnsupp), nil
}

// extended serves the EXTENDED requests we know; the others are
// OP_UNSUPPORTED.
func (s *Server) extended(id uint32, d *sftpDecoder) ([]byte, error) {
	name := d.bytes()
	if d.bad {
		return nil, ErrMalformed
	}
	switch string(name) {
	case "posix-rename@openssh.com", "hardlink@openssh.com":
		src, dst := d.str(), d.str()
		if d.bad {
			return nil, ErrMalformed
		}
		if string(name) == "hardlink@openssh.com" {
			return s.status(id, s.h.link()), nil
		}
		return s.status(id, s.h.rename(cleanPath(src), cleanPath(dst))), nil
	case "statvfs@openssh.com":
		p := cleanPath(d.str())
		if d.bad {
			return nil, ErrMalformed
		}
		st, err := s.h.statVFS(p)
		if err != nil {
			return s.status(id, err), nil
		}
		s.out.start(fxpExtendedReply, id)
		for _, v := range [...]uint64{st.BlockSize, st.FragmentSize, st.Blocks, st.BlocksFree,
			st.BlocksAvail, st.Files, st.FilesFree, st.FilesAvail, 0 /* fsid */, 0 /* flag */, st.NameMax} {
			s.out.u64(v)
		}
		return s.out.finish(), nil
	}
	return s.status(id, errFxUnsupp), nil
}

// read serves READ: at most sftpMaxRead bytes, read straight into the
// answer. A short read at the end of the file answers what was read; a
// read at or past the end answers EOF.
func (s *Server) read(id uint32, hd *sftpHandle, off uint64, n uint32) []byte {
	switch {
	case hd == nil:
		return s.status(id, errBadHandle)
	case hd.f == nil:
		return s.status(id, statusError{stFailure, "read on a directory handle"})
	}
	n = min(n, sftpMaxRead)
	s.out.start(fxpData, id)
	s.out.u32(0)
	data := s.out.at + dataHeaderLen
	if need := data + int(n); cap(s.out.b) < need {
		// Room for the answers that may wait with it (sftpFlushAt), so
		// that a run of READs grows the buffer once.
		b := make([]byte, data, max(need, min(2*cap(s.out.b), sftpFlushAt+dataHeaderLen+sftpMaxRead)))
		copy(b, s.out.b)
		s.out.b = b
	}
	got, err := hd.f.ReadAt(s.out.b[data:data+int(n)], int64(off))
	if err != nil && (err != io.EOF || got == 0) {
		if err == io.EOF {
			err = errFxEOF
		}
		return s.status(id, err)
	}
	s.out.b = s.out.b[:data+got]
	b := s.out.finish()
	b[9], b[10], b[11], b[12] = byte(got>>24), byte(got>>16), byte(got>>8), byte(got)
	return b
}

// handleOf decodes a handle field and returns its handle, nil if unknown.
func (s *Server) handleOf(d *sftpDecoder) *sftpHandle {
	hd, _ := s.handleKey(d)
	return hd
}

func (s *Server) handleKey(d *sftpDecoder) (*sftpHandle, string) {
	b := d.bytes()
	if d.bad {
		return nil, ""
	}
	hd := s.handles[string(b)] // no allocation for the lookup
	if hd == nil {
		return nil, ""
	}
	return hd, hd.key
}

// newHandle registers hd and answers HANDLE. Handles are decimal numbers,
// counting OPEN and OPENDIR requests from 1 in the session, as pkg/sftp's
// are.
func (s *Server) newHandle(id uint32, hd *sftpHandle) []byte {
	key := strconv.FormatUint(s.next, 10)
	hd.key = key
	s.handles[key] = hd
	s.out.start(fxpHandle, id)
	s.out.str(key)
	return s.out.finish()
}

// attrsAnswer answers ATTRS, or the error's STATUS.
func (s *Server) attrsAnswer(id uint32, info fsops.Info, err error) []byte {
	if err != nil {
		return s.status(id, err)
	}
	s.out.start(fxpAttrs, id)
	s.out.attrs(info)
	return s.out.finish()
}

// nameAnswer answers NAME with one entry whose long name is the name and
// whose attributes are empty (REALPATH, READLINK).
func (s *Server) nameAnswer(id uint32, name string) []byte {
	s.out.start(fxpName, id)
	s.out.u32(1)
	s.out.str(name)
	s.out.str(name)
	s.out.u32(0)
	return s.out.finish()
}

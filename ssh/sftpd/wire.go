package sftpd

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// The SFTP version 3 wire format (draft-ietf-secsh-filexfer-02, with
// OpenSSH's extensions). Every packet is
//
//	uint32 length  (of what follows: the type byte and the body)
//	byte   type
//	uint32 request id  (INIT and VERSION carry the version here instead)
//	...    fields: uint32, uint64, string (uint32 length + bytes), attrs
//
// Answers are encoded to be byte-for-byte what pkg/sftp's RequestServer sent
// before we served SFTP ourselves (see server.go for what differs, only
// in requests no client sends).

// Packet types.
const (
	fxpInit          = 1
	fxpVersion       = 2
	fxpOpen          = 3
	fxpClose         = 4
	fxpRead          = 5
	fxpWrite         = 6
	fxpLstat         = 7
	fxpFstat         = 8
	fxpSetstat       = 9
	fxpFsetstat      = 10
	fxpOpendir       = 11
	fxpReaddir       = 12
	fxpRemove        = 13
	fxpMkdir         = 14
	fxpRmdir         = 15
	fxpRealpath      = 16
	fxpStat          = 17
	fxpRename        = 18
	fxpReadlink      = 19
	fxpSymlink       = 20
	fxpStatus        = 101
	fxpHandle        = 102
	fxpData          = 103
	fxpName          = 104
	fxpAttrs         = 105
	fxpExtended      = 200
	fxpExtendedReply = 201
)

// Status codes.
const (
	stOK               = 0
	stEOF              = 1
	stNoSuchFile       = 2
	stPermissionDenied = 3
	stFailure          = 4
	stBadMessage       = 5
	stOpUnsupported    = 8
)

// OPEN's pflags.
const (
	fxfRead   = 0x01
	fxfWrite  = 0x02
	fxfAppend = 0x04
	fxfCreat  = 0x08
	fxfTrunc  = 0x10
	fxfExcl   = 0x20
)

// Attribute flags.
const (
	attrSize        = 0x00000001
	attrUIDGID      = 0x00000002
	attrPermissions = 0x00000004
	attrACModTime   = 0x00000008
	attrExtended    = 0x80000000
)

const (
	// sftpMaxPacket is the largest packet accepted (type byte and body):
	// OpenSSH's sftp-server and pkg/sftp both take 256 KiB, and a longer
	// one ends the subsystem, as it does there.
	sftpMaxPacket = 256 * 1024
	// sftpMaxRead caps the data one READ answers, as pkg/sftp's request
	// server did (32 KiB, its default maxTxPacket): a client asking for
	// more gets a short read and asks again.
	sftpMaxRead = 32 * 1024
	// sftpReaddirBatch is how many entries one READDIR answers (pkg/sftp's
	// MaxFilelist).
	sftpReaddirBatch = 100
	// sftpFlushAt is how many bytes of answers Server.Serve lets wait
	// while the client's next request is already here: a client with
	// requests in flight (OpenSSH's sftp keeps 64) gets its answers in
	// fewer, fuller SSH packets, each of which costs a seal and a write
	// system call (a 32 KiB READ's answer alone is a full packet and a
	// 13-byte one). The answers waiting are at most this plus one answer.
	sftpFlushAt = 64 << 10
	// dataHeaderLen is a DATA answer's header: length, type, id, data length.
	dataHeaderLen = 4 + 1 + 4 + 4
)

// sftpExtensions is what VERSION advertises, in pkg/sftp's order and with
// its version strings (OpenSSH's sftp looks for posix-rename and statvfs
// here; hardlink is advertised but answered OP_UNSUPPORTED).
var sftpExtensions = [...]struct{ name, data string }{
	{"hardlink@openssh.com", "1"},
	{"posix-rename@openssh.com", "1"},
	{"statvfs@openssh.com", "2"},
}

// sftpDecoder reads the fields of one packet body. A field that does not fit
// in what is left sets bad and reads as zero; nothing is allocated beyond the
// strings the caller asks for, which are bounded by the packet.
type sftpDecoder struct {
	b   []byte
	bad bool
}

func (d *sftpDecoder) u32() uint32 {
	if len(d.b) < 4 {
		d.bad, d.b = true, nil
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *sftpDecoder) u64() uint64 {
	if len(d.b) < 8 {
		d.bad, d.b = true, nil
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// bytes returns a string field without copying it (valid until the next
// packet is read).
func (d *sftpDecoder) bytes() []byte {
	n := d.u32()
	if d.bad || uint64(n) > uint64(len(d.b)) {
		d.bad, d.b = true, nil
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *sftpDecoder) str() string { return string(d.bytes()) }

// sftpAttrs are the attributes of SETSTAT and FSETSTAT.
type sftpAttrs struct {
	flags        uint32
	size         uint64
	uid, gid     uint32
	perm         uint32
	atime, mtime uint32
}

// attrs decodes attributes whose flags were already read. Extended pairs
// are checked and skipped.
func (d *sftpDecoder) attrs(flags uint32) sftpAttrs {
	a := sftpAttrs{flags: flags}
	if flags&attrSize != 0 {
		a.size = d.u64()
	}
	if flags&attrUIDGID != 0 {
		a.uid, a.gid = d.u32(), d.u32()
	}
	if flags&attrPermissions != 0 {
		a.perm = d.u32()
	}
	if flags&attrACModTime != 0 {
		a.atime, a.mtime = d.u32(), d.u32()
	}
	if flags&attrExtended != 0 {
		n := d.u32()
		// Each pair is at least two empty strings (8 bytes).
		if uint64(n) > uint64(len(d.b)/8) {
			d.bad = true
		}
		for i := uint32(0); i < n && !d.bad; i++ {
			d.bytes()
			d.bytes()
		}
	}
	return a
}

// sftpEncoder builds one answer in a buffer reused for the whole session.
//
// b[:at] are answers already encoded and not yet sent (Server.Serve sends
// them together); the packet being encoded starts at b[at].
type sftpEncoder struct {
	b  []byte
	at int
}

// start begins a packet of type typ whose first field is v (the request id,
// or the version for VERSION), after the answers waiting to be sent.
func (e *sftpEncoder) start(typ byte, v uint32) {
	e.b = append(e.b[:e.at], 0, 0, 0, 0, typ)
	e.u32(v)
}

// finish fills in the length and returns the packet.
func (e *sftpEncoder) finish() []byte {
	binary.BigEndian.PutUint32(e.b[e.at:], uint32(len(e.b)-e.at-4))
	return e.b[e.at:]
}

// keep leaves the packet just finished to be sent with the next ones.
func (e *sftpEncoder) keep() { e.at = len(e.b) }

// take returns the answers waiting, and forgets them.
func (e *sftpEncoder) take() []byte {
	b := e.b[:e.at]
	e.b, e.at = e.b[:0], 0
	return b
}

func (e *sftpEncoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *sftpEncoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }

func (e *sftpEncoder) str(s string) {
	e.u32(uint32(len(s)))
	e.b = append(e.b, s...)
}

// status encodes a STATUS answer. The language tag is empty, as pkg/sftp
// sent it.
func (e *sftpEncoder) status(id, code uint32, msg string) {
	e.start(fxpStatus, id)
	e.u32(code)
	e.str(msg)
	e.str("")
}

// attrs encodes a file's attributes the way pkg/sftp did for the
// os.FileInfo our handlers gave it: size, uid/gid, permissions (with the
// file type bits), atime and mtime, atime being the mtime.
func (e *sftpEncoder) attrs(i fsops.Info) {
	mtime := uint32(i.ModTime.Unix())
	e.u32(attrSize | attrUIDGID | attrPermissions | attrACModTime)
	e.u64(uint64(i.Size))
	e.u32(i.UID)
	e.u32(i.GID)
	e.u32(fsops.POSIXMode(i.Mode))
	e.u32(mtime)
	e.u32(mtime)
}

// POSIX file type and mode bits, as SFTP v3 carries them (fsops.POSIXMode
// makes them; longname reads them).
const (
	sIFIFO  = 0o010000
	sIFCHR  = 0o020000
	sIFDIR  = 0o040000
	sIFBLK  = 0o060000
	sIFREG  = 0o100000
	sIFLNK  = 0o120000
	sIFSOCK = 0o140000
	sIFMT   = 0o170000
	sISUID  = 0o4000
	sISGID  = 0o2000
	sISVTX  = 0o1000
)

// longname is a READDIR entry's `ls -l` line, which OpenSSH's sftp prints
// for `ls -l`. It is what pkg/sftp produced for our entries: one link,
// numeric owner and group, the date with the time of day for the last six
// months and the year before that.
func longname(i fsops.Info, now time.Time) string {
	mode := fsops.POSIXMode(i.Mode)
	var perm [10]byte
	switch mode & sIFMT {
	case sIFREG:
		perm[0] = '-'
	case sIFDIR:
		perm[0] = 'd'
	case sIFLNK:
		perm[0] = 'l'
	case sIFBLK:
		perm[0] = 'b'
	case sIFCHR:
		perm[0] = 'c'
	case sIFIFO:
		perm[0] = 'p'
	case sIFSOCK:
		perm[0] = 's'
	default:
		perm[0] = '?'
	}
	const rwx = "rwxrwxrwx"
	for k := 0; k < 9; k++ {
		perm[k+1] = '-'
		if mode&(1<<(8-k)) != 0 {
			perm[k+1] = rwx[k]
		}
	}
	special := func(bit uint32, at int, set, unset byte) {
		if mode&bit != 0 {
			if perm[at] == 'x' {
				perm[at] = set
			} else {
				perm[at] = unset
			}
		}
	}
	special(sISUID, 3, 's', 'S')
	special(sISGID, 6, 's', 'S')
	special(sISVTX, 9, 't', 'T')

	yearOrTime := i.ModTime.Format("15:04")
	if i.ModTime.Before(now.AddDate(0, -6, 0)) {
		yearOrTime = i.ModTime.Format("2006")
	}
	return fmt.Sprintf("%s %4d %-8s %-8s %8d %s %5s %s", perm[:], 1,
		strconv.FormatUint(uint64(i.UID), 10), strconv.FormatUint(uint64(i.GID), 10),
		i.Size, i.ModTime.Format("Jan 2"), yearOrTime, i.Name)
}

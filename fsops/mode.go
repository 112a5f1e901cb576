package fsops

import (
	"io/fs"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// POSIX file type and mode bits (st_mode), as SFTP v3 attributes and Node's
// fs.Stats.mode carry them; the same numbers on every Unix.
const (
	posixIFIFO  = 0o010000
	posixIFCHR  = 0o020000
	posixIFDIR  = 0o040000
	posixIFBLK  = 0o060000
	posixIFREG  = 0o100000
	posixIFLNK  = 0o120000
	posixIFSOCK = 0o140000
	posixISUID  = 0o4000
	posixISGID  = 0o2000
	posixISVTX  = 0o1000
)

// POSIXMode is the st_mode number of a file mode: the file type bits, the
// permission bits and setuid, setgid and sticky. It is the one conversion
// every protocol uses (SFTP attributes, get_file_info's "mode").
//
// Each of the seven POSIX types maps to its S_IF* bits. A type with no POSIX
// name gets no type bits (S_IFMT 0, "unknown", which ls shows as '?'):
// fs.ModeIrregular (what ReadDirTypes reports for FIFOs, sockets and
// devices, whose exact type it does not read) and any other combination of
// type bits. Such a file is never reported as regular: a client would try
// to read it.
func POSIXMode(m fs.FileMode) uint32 {
	v := uint32(m & fs.ModePerm)
	switch m & fs.ModeType {
	case 0:
		v |= posixIFREG
	case fs.ModeDir:
		v |= posixIFDIR
	case fs.ModeSymlink:
		v |= posixIFLNK
	case fs.ModeNamedPipe:
		v |= posixIFIFO
	case fs.ModeSocket:
		v |= posixIFSOCK
	case fs.ModeDevice:
		v |= posixIFBLK
	case fs.ModeDevice | fs.ModeCharDevice:
		v |= posixIFCHR
	}
	if m&fs.ModeSetuid != 0 {
		v |= posixISUID
	}
	if m&fs.ModeSetgid != 0 {
		v |= posixISGID
	}
	if m&fs.ModeSticky != 0 {
		v |= posixISVTX
	}
	return v
}

// SafeMode is the mode the daemon sets on a file it writes for a client:
// the permission bits and the sticky bit, never setuid or setgid. The
// daemon writes as its own user (root with --run-as), so putting those
// bits back would turn content the agent chose into a setuid file of the
// daemon's user. It is applied where a mode is set, so no caller can
// forget it: the directory workspace's Chmod and Fchmod (SFTP,
// checkpoint_restore and transaction_apply set modes through those; the
// memory workspace keeps the permission bits only).
func SafeMode(m fs.FileMode) fs.FileMode {
	return m&fs.ModePerm | m&fs.ModeSticky
}

// Fchmod sets the mode of the open file f (through its descriptor, not its
// name, so a name swapped since it was opened changes nothing), without
// setuid or setgid (SafeMode). f must come from a Workspace's OpenFile (or
// wrap one and pass Chmod on).
func Fchmod(f File, mode fs.FileMode) error {
	c, ok := f.(interface{ Chmod(fs.FileMode) error })
	if !ok {
		return errcode.New(errcode.InvalidArgument, "chmod", "", "this open file cannot have its mode set")
	}
	return c.Chmod(SafeMode(mode))
}

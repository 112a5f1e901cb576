package opfile

import (
	"encoding/binary"
	"errors"
	"fmt"

	"syscall"
)

// The POSIX ACL tags of the system.posix_acl_access attribute
// (linux/posix_acl_xattr.h): a version word, then 8-byte entries of tag,
// permissions and id, little-endian.
const (
	aclUser  = 0x02
	aclGroup = 0x08
	aclWrite = 0x02
)

// aclWriters says who a POSIX ACL on path lets write it besides its owner,
// its owning group and others (which the mode shows): "user 65534" or
// "group 1001 (devs)" (groupName) for the first named entry with write
// that is not root, this process's user or the owner (a user), nor root's
// or the owner's private group (a group); "" when none or no ACL. With an
// ACL the mode's group bits are the ACL's mask, so a named entry can write
// exactly when they show write; the caller asks only then. An ACL that
// cannot be read is said to (fail closed).
func aclWriters(path string, uid int) string {
	buf := make([]byte, 4096)
	n, err := syscall.Getxattr(path, "system.posix_acl_access", buf)
	if errors.Is(err, syscall.ENODATA) || errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
		return ""
	}
	if err != nil {
		return fmt.Sprintf("an ACL that cannot be read (%v)", err)
	}
	b := buf[:n]
	if len(b) < 4 {
		return "an ACL that cannot be read (too short)"
	}
	for b = b[4:]; len(b) >= 8; b = b[8:] {
		tag, perm, id := binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:]), int(binary.LittleEndian.Uint32(b[4:]))
		if perm&aclWrite == 0 {
			continue
		}
		switch tag {
		case aclUser:
			if id != 0 && id != uid && id != euid() {
				return fmt.Sprintf("user %d through an ACL", id)
			}
		case aclGroup:
			if id != 0 && !privateGroup(uid, id) {
				return groupName(id) + " through an ACL"
			}
		}
	}
	return ""
}

package opfile

import (
	"strconv"
	"strings"
)

// The files that say which ids this process's user namespace maps, and
// the id the kernel shows for one it does not; tests point them elsewhere.
var (
	uidMapFile, gidMapFile           = "/proc/self/uid_map", "/proc/self/gid_map"
	overflowUIDFile, overflowGIDFile = "/proc/sys/kernel/overflowuid", "/proc/sys/kernel/overflowgid"
)

// unmappedOwner reports whether uid, a file's owner, is the overflow uid
// of a user namespace that does not map every id (a rootless container,
// unshare -r): the file belongs to a user outside the namespace, whom the
// kernel shows as the overflow uid (65534), and no one inside can tell who
// that is or give the file to anyone.
func unmappedOwner(uid int) bool { return unmappedID(uid, overflowUIDFile, uidMapFile) }

// unmappedGroup is unmappedOwner for a file's group.
func unmappedGroup(gid int) bool { return unmappedID(gid, overflowGIDFile, gidMapFile) }

func unmappedID(id int, overflowFile, mapFile string) bool {
	overflow, err := ReadRegular(overflowFile, 64)
	if err != nil {
		return false
	}
	idMap, err := ReadRegular(mapFile, 64<<10)
	if err != nil {
		return false
	}
	return notMapped(id, overflow, idMap)
}

// notMapped is unmappedID's judgement from the two files' contents:
// overflow (/proc/sys/kernel/overflowuid's, "65534\n") and idMap
// (/proc/self/uid_map's, lines of "inside outside count"). The initial
// namespace maps every id ("0 0 4294967295"); a map that covers fewer
// leaves ids outside it, shown as the overflow id. False when either
// cannot be parsed: the message then names the id as it is.
func notMapped(id int, overflow, idMap []byte) bool {
	o, err := strconv.ParseUint(strings.TrimSpace(string(overflow)), 10, 32)
	if err != nil || uint64(id) != o {
		return false
	}
	var total uint64
	for _, line := range strings.Split(string(idMap), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return false
		}
		n, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			return false
		}
		total += n
	}
	return total < 1<<32-1
}

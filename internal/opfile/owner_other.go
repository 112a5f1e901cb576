//go:build !unix

package opfile

import "io/fs"

// owner is not known off Unix (Windows has no uid and gid): ok is false,
// and the owner rule has nothing to judge. The client side, which reads
// its token files there, uses ReadRegular, which does not judge owners.
func owner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

// links is not known off Unix: 1, and the hard link rule has nothing to
// judge.
func links(fs.FileInfo) uint64 { return 1 }

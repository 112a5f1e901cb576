//go:build !linux

package fsops

import "errors"

// ownLinkAt: a symlink's owner is changed through an O_PATH descriptor of
// the link, which only Linux has (owner_linux.go). An owner for new
// entries is a root daemon's --run-as, which runs on Linux only;
// elsewhere a workspace with one makes no symlink.
func ownLinkAt(o *Owner, dirfd int, name, target string) error {
	if o == nil {
		return nil
	}
	return errors.New("fsops: giving a new symlink to an owner (Options.Owner) needs Linux")
}

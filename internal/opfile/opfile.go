// Package opfile reads the operator's files that grant rights or hold a
// secret: --config, the token files (--auth-token-file,
// --operator-token-file, --metrics-token-file, --tokens), the SSH port's
// authentication files (--ssh-authorized-keys, --ssh-trusted-user-ca-keys,
// --ssh-password-hash-file), the TLS pair (--tls-cert, --tls-key), the
// commands system.run may run unasked (--exec-approvals), the servers the
// daemon spawns (--upstreams), the tool site's secrets (--site-env-file)
// and the code the daemon runs (the --extensions directory's files). There
// is one reader, Read, for every start and every reload (SIGHUP, and the
// SSH port's re-read before a login).
//
// Read never blocks and never reads without bound: the file is opened with
// O_NONBLOCK (a FIFO or a device planted under the name cannot hold the
// start or a reload), only a regular file is read, and at most a bound.
// On Linux only a regular file is opened for reading at all: the name is
// opened O_PATH first, which runs no device's or FIFO's open, even for
// one swapped in under the name after its stat (open_linux.go).
// Like sshd's StrictModes, it refuses a file that a user other than root
// and the daemon's own could change (CheckModes states the rule): one
// owned by another user, writable by its group or by others, or lying in a
// directory (as named, or once symlinks are followed) that another user
// owns, or that its group or others may write without the sticky bit.
// docs/configuration.md says which files, and why the others (a CA bundle
// a client trusts, a client's own token file) are read with ReadRegular.
package opfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/agentbe/agentbe-daemon/internal/resolvepath"
)

// Read reads the regular file name, at most max bytes, after checking that
// only its owner can change it (CheckModes), and checking it again once it
// is open: the way judged must lead to the file opened (ErrChanged when it
// no longer does). An error is the reason alone (the caller names the flag
// and the file); a missing file's matches os.ErrNotExist.
func Read(name string, max int64) ([]byte, error) {
	data, _, err := ReadWhere(name, max)
	return data, err
}

// ReadWhere is Read that also says where name led: the path, without
// symlinks, of the file read, as the walk that judged its way after the
// file was opened found it (the file read is the file at that path).
// tools/extensions reads its files with it, to hold what it reads to its
// directory.
func ReadWhere(name string, max int64) ([]byte, string, error) {
	if err := CheckModes(name); err != nil {
		return nil, "", err
	}
	return read(name, max, true)
}

// ErrChanged is Read's error when the way name leads, walked and judged
// again once the file is open, no longer leads to the file opened: the
// name, or a link or directory on its way, changed between the two.
var ErrChanged = errors.New("changed while it was read (its path no longer leads to the file opened); read it again")

// beforeOpen, when set, runs between the first judgement of a name and
// its open: the tests change the name there.
var beforeOpen func(name string)

// whileOpen, when set, runs once read has opened name, while what it
// opened is held and before its type is judged: the tests look there at
// what the open did.
var whileOpen func(name string)

// ReadRegular is Read without the owner checks: for a file a user names
// on their own machine (the token file of a client, agentbe-bridge or
// agent-backend proxy), where who else may write it is theirs to judge. It
// still never blocks (a FIFO, a device), reads only a regular file, and at
// most max bytes, so a wrong name fails with the reason, not a hang or the
// memory of /dev/zero. It stands in for os.ReadFile: an error is an
// *fs.PathError that names the file ("open NAME: not a regular file (a
// FIFO)"), and a missing file's matches os.ErrNotExist.
func ReadRegular(name string, max int64) ([]byte, error) {
	b, _, err := read(name, max, false)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return b, nil
}

// MaxTokenFile bounds a token file read with ReadRegular: one token, and
// room to spare.
const MaxTokenFile = 64 << 10

func read(name string, max int64, modes bool) ([]byte, string, error) {
	// What is not a regular file is refused before it is opened: opening
	// is what a device acts on (a watchdog arms, a tape rewinds on close)
	// and what releases a writer waiting at a FIFO. The descriptor is
	// judged again below, in case the name was replaced in between.
	if fi, err := os.Stat(name); err == nil && !fi.Mode().IsRegular() {
		return nil, "", notRegular(fi.Mode())
	}
	if beforeOpen != nil {
		beforeOpen(name)
	}
	// openRegular opens name for reading only once its descriptor is a
	// regular file (on Linux, without opening anything else under the
	// name, even one swapped in since the stat above).
	f, fi, err := openRegular(name)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	// The checks above judged the name; judge the file this descriptor
	// reads too, in case the name was replaced in between.
	at := "" // where the judged way led (modes only)
	if modes {
		if err := ownerOK(name, fi, os.Geteuid(), true); err != nil {
			return nil, "", err
		}
		if err := fileModeOK(name, fi); err != nil {
			return nil, "", err
		}
		// And the way again, now that the file is open: the walk must
		// lead to the file this descriptor reads. A name missing at the
		// first walk (which ends there without an error) and put there
		// before the open (a link planted in a sticky directory, to a
		// file the rule passes) is judged so, and so is any other change
		// of the way between the two.
		if at, err = new(Judge).where(name, fi); err != nil {
			return nil, "", err
		}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, "", unwrap(err)
	}
	if int64(len(data)) > max {
		return nil, "", fmt.Errorf("larger than %d bytes", max)
	}
	return data, at, nil
}

// CheckModes reports why the file name could be changed by a user other
// than root and this process's user; nil when it cannot. It is the one
// rule for every file that grants rights (Read applies it; a caller that
// does not read the file itself, such as a directory of code, calls it).
// Like sshd's StrictModes, and walking the name one element at a time,
// following each symlink where it stands:
//
//   - every directory on the way, every symlink and the file itself must
//     be owned by root or by this process's user (whoever owns one may
//     chmod it and change it);
//   - the file must not be writable by its group or by others;
//   - a directory on the way must not be writable by its group or by
//     others unless it has the sticky bit (/tmp, a Kubernetes volume's
//     1777 mount point): whoever can write there can put another file
//     under the name, and in a sticky one can add only names of their
//     own, which the owner rule refuses;
//   - the file must not have more than one hard link when it lies in a
//     directory others may write (a sticky one): a hard link's owner is
//     the file's, not whoever made the name, so another user's link to
//     a file the rule passes (where fs.protected_hardlinks is 0) would
//     pass as the operator's (linkedOK).
//
// Writable by the group is allowed when the group is root's (gid 0): the
// group of root-owned files in container images (OpenShift runs an image
// as an arbitrary uid in group 0 and has its files made g=u), whose
// members on a host are root's. It is allowed too when the group is the
// owner's private group (privateGroup): under umask 002 (Debian's and
// Ubuntu's user private groups) a user's checkout is group-writable by a
// group of that user alone. A POSIX ACL's named user or group that may
// write counts as a writer too (aclWriters). A name that does not exist
// yet is judged by the directories that do.
func CheckModes(name string) error { return new(Judge).CheckModes(name) }

// Judge applies CheckModes to the files of one batch (the pages of one
// request of a tool site), sharing the verdicts of the directories on
// their ways: each directory met is judged once for the batch, and a
// name whose leading directories a walk of the batch has already met as
// directories is walked from the deepest of them. Every symlink, and the
// file itself, is judged at every call; a file's verdict is never kept.
// A directory's verdict holds for the batch because only a user the
// verdict trusts (root, or this process's user, owning it and the
// directories above it) can change it; a Judge is one batch's, never
// kept from one request to the next, so a directory another user could
// change since is judged again. The zero Judge is ready; it is safe for
// concurrent use.
type Judge struct {
	mu sync.Mutex
	// dirs holds the verdict of each directory met, by its path as walked
	// (a Step's Path, which holds no symlink).
	dirs map[string]error
}

// judgements counts, for the tests, the directories a Judge's walks met
// (met) and those it judged rather than took from its verdicts (dirs).
var judgements struct {
	sync.Mutex
	met, dirs int
}

// CheckModes is the package's CheckModes, with the batch's verdicts.
func (j *Judge) CheckModes(name string) error {
	_, _, err := j.walk(name)
	return err
}

// where judges name as CheckModes does and reports where the walk led,
// which must be the file opened (fi, its descriptor's stat): ErrChanged
// when the walk ends short of it (a component missing) or at another.
func (j *Judge) where(name string, opened fs.FileInfo) (string, error) {
	at, whole, err := j.walk(name)
	if err != nil {
		return "", err
	}
	if !whole {
		return "", ErrChanged
	}
	if fi, err := os.Stat(at); err != nil || !os.SameFile(fi, opened) {
		return "", ErrChanged
	}
	return at, nil
}

// walk is CheckModes' walk of name: its verdict, where the walk led
// (resolvepath.Walk's answer), and whether it got there whole, not
// ended at a component missing or below a file.
func (j *Judge) walk(name string) (string, bool, error) {
	// The name is walked as the open walks it (resolvepath.Walk), not
	// cleaned: in link/../x the ".." is taken from where link leads, and
	// cleaning would judge another file.
	euid := os.Geteuid()
	whole := true
	visit := func(st resolvepath.Step) error {
		if st.Info == nil {
			err := unjudged(st)
			whole = whole && err != resolvepath.ErrStopWalk
			return err
		}
		fi := st.Info
		if fi.IsDir() {
			return j.dir(st.Path, fi, euid)
		}
		if err := ownerOK(st.Path, fi, euid, st.Last && fi.Mode().IsRegular()); err != nil {
			return err
		}
		if st.Last && fi.Mode().IsRegular() {
			if err := fileModeOK(st.Path, fi); err != nil {
				return err
			}
			return linkedOK(st.Path, fi)
		}
		return nil
	}
	if from, rel, err, ok := j.known(name); ok {
		if err != nil {
			return "", false, err
		}
		at, err := resolvepath.WalkFrom(from, rel, visit)
		return at, whole, err
	}
	at, err := resolvepath.Walk(name, visit)
	return at, whole, err
}

// known finds the deepest directory leading name that the batch has met
// as one: name absolute and its leading elements plain names (no "",
// "." or ".."), their path as written is the path a walk met them at.
// It returns that directory and the rest of name, or the verdict of the
// first of them refused.
func (j *Judge) known(name string) (dir, rel string, err error, ok bool) {
	if !filepath.IsAbs(name) {
		return "", "", nil, false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	verdict, met := j.dirs["/"]
	if !met {
		return "", "", nil, false
	}
	if verdict != nil {
		return "", "", verdict, true
	}
	dir, rel = "/", strings.TrimLeft(name, "/")
	for {
		c, after, more := strings.Cut(rel, "/")
		if !more || c == "" || c == "." || c == ".." {
			return dir, rel, nil, true
		}
		next := filepath.Join(dir, c)
		verdict, met := j.dirs[next]
		if !met {
			return dir, rel, nil, true
		}
		if verdict != nil {
			return "", "", verdict, true
		}
		dir, rel = next, after
	}
}

// dir is the verdict of the directory at path (dirOK), judged once for
// the batch.
func (j *Judge) dir(path string, fi fs.FileInfo, euid int) error {
	j.mu.Lock()
	verdict, met := j.dirs[path]
	j.mu.Unlock()
	judgements.Lock()
	judgements.met++
	if !met {
		judgements.dirs++
	}
	judgements.Unlock()
	if met {
		return verdict
	}
	verdict = dirOK(path, fi, euid)
	j.mu.Lock()
	if j.dirs == nil {
		j.dirs = map[string]error{}
	}
	j.dirs[path] = verdict
	j.mu.Unlock()
	return verdict
}

// unjudged is CheckModes' answer at a component whose Lstat failed. A
// missing one (or one below a file) ends the walk without an error: the
// open fails there too, or creates what the directories judged so far
// hold. Any other failure is a refusal, for the open may still succeed
// where the walk's Lstat of the whole path cannot: a path longer than
// PATH_MAX once links are followed (ENAMETOOLONG, while the kernel
// follows each link from where it stands), or a relative name in a
// working directory below one this user may not search (EACCES there,
// while the open starts from the working directory).
func unjudged(st resolvepath.Step) error {
	if errors.Is(st.Err, fs.ErrNotExist) || errors.Is(st.Err, syscall.ENOTDIR) {
		return resolvepath.ErrStopWalk
	}
	return fmt.Errorf("%s, on its path, cannot be judged (%w), so who may change the file cannot be told: refused", st.Path, unwrap(st.Err))
}

// ownerOK refuses an element of the path owned by neither root nor euid.
func ownerOK(path string, fi fs.FileInfo, euid int, isFile bool) error {
	uid, _, ok := owner(fi)
	if !ok || uid == 0 || uid == euid {
		return nil
	}
	unmapped := unmappedOwner(uid)
	if isFile {
		if unmapped {
			return fmt.Errorf("is owned by a user not mapped into this process's user namespace (shown as uid %d, the overflow uid), so who may change it cannot be told here: it could grant rights to whoever that is; give it to a user mapped in the namespace (copy it into a directory this process's user, %s, owns, and name the copy) or map its owner into the namespace", uid, who(euid))
		}
		return fmt.Errorf("is owned by %s, neither root nor this process's user (%s): that user can change it and grant themselves rights; chown root %s, or run as that user", who(uid), who(euid), path)
	}
	what := "a directory on its path"
	if fi.Mode()&fs.ModeSymlink != 0 {
		what = "a symlink on its path"
	}
	if unmapped {
		return fmt.Errorf("%s, %s, is owned by a user not mapped into this process's user namespace (shown as uid %d, the overflow uid), so who may replace the file cannot be told here; copy the file into a directory this process's user (%s) owns, or map that user into the namespace", what, path, uid, who(euid))
	}
	return fmt.Errorf("%s, %s, is owned by %s, neither root nor this process's user (%s): that user can replace the file; chown root %s, or move the file", what, path, who(uid), who(euid), path)
}

// linkedOK refuses a file of more than one hard link in a directory
// others may write (the sticky directories dirOK lets by): there the
// name may be another user's hard link to the file, which the owner rule
// cannot tell from the file's own name. The kernel refuses such links
// to a file the user may not write where fs.protected_hardlinks is 1
// (most systems); this holds where it is 0.
func linkedOK(path string, fi fs.FileInfo) error {
	n := links(fi)
	if n <= 1 {
		return nil
	}
	dir := filepath.Dir(path)
	dfi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("has %d hard links, and its directory %s cannot be judged (%w): refused", n, dir, unwrap(err))
	}
	if w := writers(dir, dfi); w != "" {
		return fmt.Errorf("has %d hard links and lies in %s, which %s may write (mode %04o, with the sticky bit): another user may have made this name a link to the file, and a link's owner is the file's; copy the file there rather than link it", n, dir, w, dfi.Mode().Perm())
	}
	return nil
}

// fileModeOK refuses a file its group (other than root's) or others may
// write.
func fileModeOK(path string, fi fs.FileInfo) error {
	if w := writers(path, fi); w != "" {
		return fmt.Errorf("is writable by its group or by others (mode %04o, %s may write it): whoever can write it can grant themselves rights; chmod go-w %s", fi.Mode().Perm(), w, path)
	}
	return nil
}

// dirOK refuses a directory owned by neither root nor euid, or one its
// group (other than root's) or others may write without the sticky bit.
func dirOK(dir string, fi fs.FileInfo, euid int) error {
	if err := ownerOK(dir, fi, euid, false); err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSticky != 0 {
		return nil
	}
	if w := writers(dir, fi); w != "" {
		hint := ""
		if kubeletVolume(dir) {
			hint = " (a Kubernetes configMap volume? mount it through a projected volume: docs/deploy.md)"
		}
		return fmt.Errorf("lies in %s, which its group or others may write (mode %04o, %s may write it) without the sticky bit: whoever can write there can replace the file; chmod go-w %s, or move the file%s", dir, fi.Mode().Perm(), w, dir, hint)
	}
	return nil
}

// KubeletName reports whether name, one element of a path, is one of the
// kubelet's own in a ConfigMap, Secret or projected volume: "..data", the
// link its keys lead through, "..data_tmp", and the timestamped
// directories ("..2026_11_28_05_30_00.123") that hold the files, which
// its atomic writer names with a leading "..". ".." itself is not.
// Listings of such a volume leave them out (tools/sites: the overview and
// glob), so each file is listed once, by its own name.
func KubeletName(name string) bool {
	return strings.HasPrefix(name, "..") && name != ".."
}

// kubeletVolume reports whether dir holds the kubelet's "..data" link: a
// ConfigMap, Secret or projected volume's mount point. A plain
// `configMap:` volume's is 0777 without the sticky bit, which dirOK
// refuses; a `projected:` volume's is 1777 (docs/deploy.md).
func kubeletVolume(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, "..data"))
	return err == nil && fi.Mode()&fs.ModeSymlink != 0
}

// writers says who other than the owner may write fi, at path: "others",
// "group N (NAME)" (groupName) when the group may and is not root's or the owner's private
// group, or a user or group a POSIX ACL lets write it (aclWriters: with an
// ACL the group bits are the ACL's mask, which shows write whenever a named
// user or group may write); "" when no one.
func writers(path string, fi fs.FileInfo) string {
	m := fi.Mode().Perm()
	if m&0o002 != 0 {
		return "others"
	}
	if m&0o020 != 0 {
		uid, gid, ok := owner(fi)
		if !ok || gid != 0 && !privateGroup(uid, gid) {
			return groupName(gid)
		}
		return aclWriters(path, uid)
	}
	return ""
}

func euid() int { return os.Geteuid() }

// privateGroup reports whether gid is uid's user private group: the group
// named as the user and the user's primary group, with no members listed
// in the group file and no other user's primary group in the passwd file.
// Whoever belongs to it is the user. The files are looked at at each
// judgement (a member added later counts): the answer is kept while both
// are the same files with the same size and modification time, so a
// walk of many group-writable directories (a tool site's pages, each
// judged per request, in a checkout made under umask 002) stats the two
// files rather than reading and parsing them again at every element.
// False when either cannot be read, or names the user or group nowhere
// (a directory service's).
func privateGroup(uid, gid int) bool {
	pwFi, err1 := os.Stat(passwdFile)
	grFi, err2 := os.Stat(groupFile)
	if err1 != nil || err2 != nil {
		return false
	}
	accounts.Lock()
	defer accounts.Unlock()
	if !sameStamp(accounts.passwd, pwFi) || !sameStamp(accounts.group, grFi) {
		accounts.passwd, accounts.group, accounts.answers = pwFi, grFi, map[[2]int]bool{}
	}
	k := [2]int{uid, gid}
	if v, ok := accounts.answers[k]; ok {
		return v
	}
	v := readPrivateGroup(uid, gid)
	accounts.answers[k] = v
	return v
}

// accounts keeps privateGroup's answers for one version of the passwd and
// group files.
var accounts struct {
	sync.Mutex
	passwd, group fs.FileInfo
	answers       map[[2]int]bool
}

func sameStamp(old, cur fs.FileInfo) bool {
	return old != nil && os.SameFile(old, cur) && old.Size() == cur.Size() && old.ModTime().Equal(cur.ModTime())
}

// accountReads counts readPrivateGroup's reads of the two files (under
// accounts' lock), for the tests.
var accountReads int

// readPrivateGroup is privateGroup's judgement, from the files as they are.
func readPrivateGroup(uid, gid int) bool {
	accountReads++
	passwd, err := ReadRegular(passwdFile, 16<<20)
	if err != nil {
		return false
	}
	group, err := ReadRegular(groupFile, 16<<20)
	if err != nil {
		return false
	}
	u, g := strconv.Itoa(uid), strconv.Itoa(gid)
	name := ""
	for _, line := range strings.Split(string(passwd), "\n") {
		f := strings.Split(line, ":") // name:password:uid:gid:…
		if len(f) < 4 || f[3] != g {
			continue
		}
		if f[2] != u {
			return false // another user's primary group too
		}
		name = f[0]
	}
	if name == "" {
		return false // not the user's primary group
	}
	named := false
	for _, line := range strings.Split(string(group), "\n") {
		f := strings.Split(line, ":") // name:password:gid:members
		if len(f) < 4 || f[2] != g {
			continue
		}
		if f[0] != name || strings.TrimSpace(f[3]) != "" {
			return false // another name, or members listed
		}
		named = true
	}
	return named
}

// passwdFile and groupFile are the system's; tests point them elsewhere.
var passwdFile, groupFile = "/etc/passwd", "/etc/group"

// who names a uid: "uid 65534 (nobody)", or "uid 1234" when it has no name.
func who(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return fmt.Sprintf("uid %d", uid)
}

// groupName names a gid as who names a uid: "group 1003 (devs)", from the
// group file (groupFile) or else the system's lookup, "group 1003" when
// neither names it, and, for a group not mapped into this process's user
// namespace, says so.
func groupName(gid int) string {
	if unmappedGroup(gid) {
		return fmt.Sprintf("group %d (a group not mapped into this process's user namespace, whose members cannot be told)", gid)
	}
	group, err := ReadRegular(groupFile, 16<<20)
	if err == nil {
		g := strconv.Itoa(gid)
		for _, line := range strings.Split(string(group), "\n") {
			f := strings.Split(line, ":") // name:password:gid:members
			if len(f) >= 3 && f[2] == g && f[0] != "" {
				return fmt.Sprintf("group %d (%s)", gid, f[0])
			}
		}
	}
	if g, err := user.LookupGroupId(strconv.Itoa(gid)); err == nil {
		return fmt.Sprintf("group %d (%s)", gid, g.Name)
	}
	return fmt.Sprintf("group %d", gid)
}

// notRegular is read's refusal of what is not a regular file.
func notRegular(m fs.FileMode) error {
	return fmt.Errorf("not a regular file (%s)", TypeName(m))
}

// TypeName says what a file that is not a regular one is ("a FIFO", "a
// character device", …), from the type letters fs.FileMode.String gives
// (the POSIX bits of a mode are fsops' to convert, which this package,
// read by the doors' callers, is below): the one wording of it, which the
// extensions' refusals use too.
func TypeName(m fs.FileMode) string {
	if m.IsDir() {
		return "a directory"
	}
	s := m.Type().String()
	letters := s[:len(s)-9] // the nine permission characters follow
	for _, k := range []struct{ letter, name string }{
		{"c", "a character device"}, {"D", "a device"}, {"p", "a FIFO"}, {"S", "a socket"},
	} {
		if strings.Contains(letters, k.letter) {
			return k.name
		}
	}
	return "not a regular file (" + letters + ")"
}

func unwrap(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

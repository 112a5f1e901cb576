package opfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestReadRefusesWhatIsNotAnOperatorFile: a FIFO (no writer: the read
// would wait for ever), /dev/zero (endless), a directory, a sparse file
// past the bound, a file its group or others may write, a file in a
// directory others may write (as named, or through a symlink) are each
// refused with the reason; a plain 0600 or 0644 file in a
// private directory, or in a sticky world-writable one, reads whole.
func TestReadRefusesWhatIsNotAnOperatorFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("content\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo, sparse := fifoAndSparse(t, dir)
	open := filepath.Join(dir, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	inOpen := filepath.Join(open, "tokens")
	os.WriteFile(inOpen, []byte("x"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(inOpen, link)
	sticky := filepath.Join(dir, "sticky")
	os.Mkdir(sticky, 0o700)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	inSticky := filepath.Join(sticky, "tokens")
	os.WriteFile(inSticky, []byte("content\n"), 0o600)

	for _, c := range []struct {
		name, path, want string
	}{
		{"fifo", fifo, "not a regular file (a FIFO)"},
		{"dev zero", "/dev/zero", "not a regular file (a character device)"},
		{"directory", dir, "not a regular file (a directory)"},
		{"1 GiB sparse", sparse, "larger than 1024 bytes"},
		{"world-writable", write("ww", 0o666), "writable by its group or by others"},
		{"group-writable", groupWritable(t, write("gw", 0o620)), "writable by its group or by others"},
		{"in an open directory", inOpen, "which its group or others may write"},
		{"symlink into an open directory", link, "which its group or others may write"},
		{"missing", filepath.Join(dir, "none"), "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(c.path, 1024)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want ...%s", err, c.want)
			}
		})
	}
	for _, p := range []string{write("ok600", 0o600), write("ok644", 0o644), inSticky} {
		b, err := Read(p, 1024)
		if err != nil || string(b) != "content\n" {
			t.Fatalf("%s: %q, %v", p, b, err)
		}
	}
}

// kubeletSecret lays out a Secret volume at dir the way the kubelet's
// atomic writer and volume ownership code do: the files in a timestamped
// directory, "..data" a symlink to it, and each key a symlink through
// "..data". The mount point is a tmpfs (mode 1777); with an fsGroup,
// everything is group-owned by it, directories get the setgid bit and files
// at least 0440. sticky is whether the mount point keeps its sticky bit.
func kubeletSecret(t *testing.T, dir string, mode os.FileMode, fsGroup int, sticky bool) string {
	t.Helper()
	ts := "..2026_11_28_05_30_00.1234567890"
	rootMode, tsMode := os.FileMode(0o777), os.FileMode(0o755)
	if sticky {
		rootMode |= os.ModeSticky
	}
	if fsGroup >= 0 {
		rootMode |= os.ModeSetgid
		tsMode |= os.ModeSetgid
		mode |= 0o440
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, ts), 0o700))
	file := filepath.Join(dir, ts, "token")
	must(os.WriteFile(file, []byte("content\n"), 0o600))
	must(os.Symlink(ts, filepath.Join(dir, "..data")))
	must(os.Symlink("..data/token", filepath.Join(dir, "token")))
	for p, m := range map[string]os.FileMode{dir: rootMode, filepath.Join(dir, ts): tsMode, file: mode} {
		if fsGroup >= 0 {
			must(os.Lchown(p, 0, fsGroup))
		}
		must(os.Chmod(p, m))
	}
	return filepath.Join(dir, "token")
}

// TestReadKubernetesSecretVolume: a token in a Secret volume as the kubelet
// mounts it (deploy/kubernetes/base: defaultMode 0440, fsGroup 10001) is
// read through its two symlinks, with and without an fsGroup and with the
// modes a Secret may set, and again after the kubelet's update (a new
// timestamped directory, "..data" swapped to it). The same layout whose
// mount point lacks the sticky bit is refused: whoever may write there
// could swap "..data".
func TestReadKubernetesSecretVolume(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the kubelet's layout is root-owned and group-owned by the fsGroup")
	}
	for _, fsGroup := range []int{-1, 10001} {
		for _, mode := range []os.FileMode{0o400, 0o440, 0o644} {
			t.Run(fmt.Sprintf("fsGroup %d mode %04o", fsGroup, mode), func(t *testing.T) {
				name := kubeletSecret(t, filepath.Join(t.TempDir(), "agentbe"), mode, fsGroup, true)
				b, err := Read(name, 1024)
				if err != nil || string(b) != "content\n" {
					t.Fatalf("Read: %q, %v", b, err)
				}
			})
		}
	}
	t.Run("update", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "agentbe")
		name := kubeletSecret(t, dir, 0o440, 10001, true)
		next := filepath.Join(dir, "..2026_11_28_06_00_00.0987654321")
		if err := os.Mkdir(next, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(next, "token"), []byte("rotated\n"), 0o440); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Base(next), filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		b, err := Read(name, 1024)
		if err != nil || string(b) != "rotated\n" {
			t.Fatalf("Read after the update: %q, %v", b, err)
		}
	})
	t.Run("mount point without the sticky bit", func(t *testing.T) {
		name := kubeletSecret(t, filepath.Join(t.TempDir(), "agentbe"), 0o440, 10001, false)
		if _, err := Read(name, 1024); err == nil || !strings.Contains(err.Error(), "which its group or others may write") {
			t.Fatalf("Read: %v, want a refusal naming the open directory", err)
		}
	})
}

// TestReadRegular: without the owner checks, a FIFO (no writer), /dev/zero,
// a directory and a sparse file past the bound are still refused with the
// reason and at once; a file its group and others may write, in a directory
// they may write, reads whole.
func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	fifo, sparse := fifoAndSparse(t, dir)
	for _, c := range []struct{ path, want string }{
		{fifo, "not a regular file (a FIFO)"},
		{"/dev/zero", "not a regular file (a character device)"},
		{dir, "not a regular file (a directory)"},
		{sparse, "larger than 4096 bytes"},
		{filepath.Join(dir, "missing"), "no such file or directory"},
	} {
		if _, err := ReadRegular(c.path, 4096); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadRegular(%s): %v; want %q", c.path, err, c.want)
		}
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	p := filepath.Join(open, "token")
	os.WriteFile(p, []byte("content\n"), 0o600)
	os.Chmod(p, 0o666)
	if b, err := ReadRegular(p, 4096); err != nil || string(b) != "content\n" {
		t.Errorf("ReadRegular of a 0666 file in a 0777 directory: %q, %v", b, err)
	}
}

// groupWritable gives p, group-writable, a group other than root's (whose
// group write the rule allows): nogroup when the test runs as root; the
// user's own group, which the file has, otherwise.
func groupWritable(t *testing.T, p string) string {
	t.Helper()
	if os.Geteuid() == 0 {
		if err := os.Chown(p, 0, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if os.Getegid() == 0 && os.Geteuid() != 0 {
		t.Skip("needs a group other than root's: this user's group is root's")
	}
	if os.Geteuid() != 0 {
		// The user's own group may be a private one, which the rule
		// allows: a group file that names it nowhere makes it not.
		fakeAccounts(t, "", "")
	}
	return p
}

// fakeAccounts points the rule's passwd and group files at ones holding
// passwd and group, until the test ends.
func fakeAccounts(t *testing.T, passwd, group string) {
	t.Helper()
	dir := t.TempDir()
	pw, gr := filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	if err := os.WriteFile(pw, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gr, []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	oldPw, oldGr := passwdFile, groupFile
	passwdFile, groupFile = pw, gr
	t.Cleanup(func() { passwdFile, groupFile = oldPw, oldGr })
}

// TestPrivateGroupMayWrite: under umask 002 a user's files are writable by
// the user's private group (named as the user, the user's primary group,
// no one else in it), which the rule allows; a group with members listed,
// another name, or another user's primary group too, is refused.
func TestPrivateGroupMayWrite(t *testing.T) {
	const passwd = "root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\nbob:x:1001:1001::/home/bob:/bin/sh\ncarol:x:1002:1001::/home/carol:/bin/sh\n"
	for _, tc := range []struct {
		name     string
		group    string
		uid, gid int
		private  bool
	}{
		{"alice's private group", "root:x:0:\nalice:x:1000:\n", 1000, 1000, true},
		{"a member listed", "alice:x:1000:bob\n", 1000, 1000, false},
		{"another name", "staff:x:1000:\n", 1000, 1000, false},
		{"not in the group file", "root:x:0:\n", 1000, 1000, false},
		{"another user's primary group too", "bob:x:1001:\n", 1001, 1001, false},
		{"not the user's primary group", "bob:x:1001:\n", 1000, 1001, false},
	} {
		fakeAccounts(t, passwd, tc.group)
		if got := privateGroup(tc.uid, tc.gid); got != tc.private {
			t.Errorf("%s: privateGroup = %v", tc.name, got)
		}
	}
	passwdFile = filepath.Join(t.TempDir(), "missing")
	if privateGroup(1000, 1000) {
		t.Error("an unreadable passwd file: privateGroup = true")
	}

	// End to end, as root (who may give a file any group): a token file
	// group-writable by its owner's private group reads; the same once the
	// group lists a member is refused.
	if os.Geteuid() != 0 {
		return
	}
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 0, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o620); err != nil {
		t.Fatal(err)
	}
	fakeAccounts(t, "root:x:0:4242:root:/root:/bin/sh\n", "root:x:4242:\n")
	if _, err := Read(p, 1<<10); err != nil {
		t.Errorf("group-writable by root's private group: %v", err)
	}
	fakeAccounts(t, "root:x:0:4242:root:/root:/bin/sh\n", "root:x:4242:mallory\n")
	if _, err := Read(p, 1<<10); err == nil || !strings.Contains(err.Error(), "writable by its group or by others (mode 0620, group 4242 (root) may write it)") {
		t.Errorf("group-writable by a group with a member: %v", err)
	}
}

// nobody is the uid and gid of the tests' other user (nobody, nogroup on
// Debian): a real user that is neither root nor the tests'.
const nobody = 65534

// TestReadRefusesFilesAnotherUserOwns: a file owned by another user (who
// may chmod it and write it), a file in a directory another user owns (who
// may replace it), a symlink on the way owned by another user (planted in
// a sticky directory) are each refused, naming the owner and the fix; the
// same file owned by root reads, and so does one its group may write when
// that group is root's (files in container images).
func TestReadRefusesFilesAnotherUserOwns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a file to another user (CI runs as root)")
	}
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	theirs := filepath.Join(dir, "theirs")
	must(os.WriteFile(theirs, []byte("content\n"), 0o644))
	must(os.Chown(theirs, nobody, nobody))

	theirDir := filepath.Join(dir, "theirdir")
	must(os.Mkdir(theirDir, 0o755))
	inTheirDir := filepath.Join(theirDir, "file")
	must(os.WriteFile(inTheirDir, []byte("content\n"), 0o644))
	must(os.Chown(theirDir, nobody, nobody))

	sticky := filepath.Join(dir, "sticky")
	must(os.Mkdir(sticky, 0o755))
	must(os.Chmod(sticky, 0o777|os.ModeSticky))
	mine := filepath.Join(dir, "mine")
	must(os.WriteFile(mine, []byte("content\n"), 0o644))
	planted := filepath.Join(sticky, "planted")
	must(os.Symlink(mine, planted))
	must(os.Lchown(planted, nobody, nobody))

	rootGroup := filepath.Join(dir, "rootgroup")
	must(os.WriteFile(rootGroup, []byte("content\n"), 0o664))
	must(os.Chmod(rootGroup, 0o664))
	must(os.Chown(rootGroup, 0, 0))

	for _, c := range []struct{ name, path, want string }{
		{"file", theirs, "is owned by uid 65534"},
		{"directory", inTheirDir, "a directory on its path, " + theirDir + ", is owned by uid 65534"},
		{"symlink", planted, "a symlink on its path, " + planted + ", is owned by uid 65534"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(c.path, 1024)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "chown root") {
				t.Fatalf("err = %v, want ...%s... chown root", err, c.want)
			}
		})
	}
	must(os.Chown(theirs, 0, 0))
	for _, p := range []string{theirs, mine, rootGroup} {
		if b, err := Read(p, 1024); err != nil || string(b) != "content\n" {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
}

// TestCheckModesOfADirectory: CheckModes judges a directory named by
// itself (a directory of code, whose files are read one by one): a 0755
// one passes; one others may write, even with the sticky bit, is refused
// by the walk only when it lies on the way to a file, so its callers name
// a file inside; one another user owns is refused.
func TestCheckModesOfADirectory(t *testing.T) {
	dir := t.TempDir()
	if err := CheckModes(dir); err != nil {
		t.Fatalf("a private directory: %v", err)
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	if err := CheckModes(filepath.Join(open, "x.star")); err == nil || !strings.Contains(err.Error(), "chmod go-w "+open) {
		t.Fatalf("a file in a 0777 directory: %v", err)
	}
	if os.Geteuid() != 0 {
		return
	}
	theirs := filepath.Join(dir, "theirs")
	os.Mkdir(theirs, 0o755)
	os.Chown(theirs, nobody, nobody)
	if err := CheckModes(theirs); err == nil || !strings.Contains(err.Error(), "is owned by uid 65534") {
		t.Fatalf("a directory nobody owns: %v", err)
	}
}

// TestReadJudgesEveryDirectoryOnTheWay: a name whose symlink leads
// through a second symlink that lies in a directory others may write
// (name -> open/link -> private/file) is refused naming that directory,
// though neither the name's directory nor the file's is open: whoever may
// write there can point the second link at a file of theirs.
func TestReadJudgesEveryDirectoryOnTheWay(t *testing.T) {
	dir := t.TempDir()
	private := filepath.Join(dir, "private")
	open := filepath.Join(dir, "open")
	for _, d := range []string{private, open} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(private, 0o755)
	os.Chmod(open, 0o777)
	file := filepath.Join(private, "token")
	if err := os.WriteFile(file, []byte("content\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, filepath.Join(open, "link")); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "token")
	if err := os.Symlink(filepath.Join(open, "link"), name); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(name, 1024); err == nil || !strings.Contains(err.Error(), "lies in "+open) {
		t.Fatalf("Read through a link in an open directory: %v", err)
	}
}

// fifoAndSparse makes in dir a FIFO with no writer (a read that waits
// waits for ever) and a 1 GiB sparse file (a read that takes it whole
// takes 1 GiB), each to be refused at once.
func fifoAndSparse(t *testing.T, dir string) (fifo, sparse string) {
	t.Helper()
	fifo = filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sparse = filepath.Join(dir, "sparse")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return fifo, sparse
}

// TestDotDotAfterASymlinkIsJudgedWhereItLeads: in safe/link/../x.json,
// where link points into a directory others may write, the open goes to
// that directory's x.json (the kernel takes ".." from where the link
// led), not to safe/x.json, which cleaning the name as text would give.
// The walk judges the directory the open reaches, and refuses it.
func TestDotDotAfterASymlinkIsJudgedWhereItLeads(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.MkdirAll(filepath.Join(open, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(open, "x.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	safe := filepath.Join(dir, "safe")
	if err := os.Mkdir(safe, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(safe, "x.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(open, "sub"), filepath.Join(safe, "link")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		filepath.Join(safe, "link") + "/../x.json",
		"link/../x.json", // relative: judged from the working directory
	} {
		if !filepath.IsAbs(name) {
			t.Chdir(safe)
		}
		if _, err := Read(name, 1024); err == nil || !strings.Contains(err.Error(), "lies in "+open) {
			t.Errorf("Read(%s), which opens %s/x.json: %v, want a refusal naming %s", name, open, err, open)
		}
	}
	if _, err := Read(filepath.Join(safe, "x.json"), 1024); err != nil {
		t.Errorf("Read(safe/x.json): %v", err)
	}
}

// TestPrivateGroupReadsTheFilesOncePerVersion: a tool site judges each
// page per request, and under umask 002 every directory on the way is
// group-writable by the owner's private group, so privateGroup is asked
// at every element of every page. The passwd and group files are read
// once while they stay the same files, size and time; a member added to
// the group (the file rewritten) is seen at the next judgement.
func TestPrivateGroupReadsTheFilesOncePerVersion(t *testing.T) {
	const passwd = "alice:x:1000:1000::/home/alice:/bin/sh\n"
	fakeAccounts(t, passwd, "alice:x:1000:\n")
	before := accountReads
	for range 100 {
		if !privateGroup(1000, 1000) {
			t.Fatal("alice's private group: privateGroup = false")
		}
	}
	if n := accountReads - before; n != 1 {
		t.Errorf("100 judgements read the account files %d times, want once", n)
	}
	if err := os.WriteFile(groupFile, []byte("alice:x:1000:mallory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if privateGroup(1000, 1000) {
		t.Error("a member added to the group file: privateGroup = true")
	}
}

// TestSymlinkChainsAndLoops: a chain of 40 symlinks (what the kernel
// follows) reads; 41, and a loop, are refused by the walk's own bound,
// with a reason that does not repeat the name (the caller names it).
func TestSymlinkChainsAndLoops(t *testing.T) {
	dir := t.TempDir()
	prev := filepath.Join(dir, "token")
	if err := os.WriteFile(prev, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 41; i++ {
		link := filepath.Join(dir, "c"+strconv.Itoa(i))
		if err := os.Symlink(filepath.Base(prev), link); err != nil {
			t.Fatal(err)
		}
		prev = link
	}
	if _, err := Read(filepath.Join(dir, "c40"), 1024); err != nil {
		t.Errorf("a chain of 40 symlinks: %v", err)
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.Symlink("b", a); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", b); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{filepath.Join(dir, "c41"), a} {
		err := CheckModes(name)
		if err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") || strings.Contains(err.Error(), dir) {
			t.Errorf("CheckModes(%s): %v, want too many levels of symbolic links, without the name", name, err)
		}
	}
}

// TestGroupsAreNamed: a group that may write is named as a user is, from
// the group file: "group 4243 (devs)"; one the file does not name by
// number alone.
func TestGroupsAreNamed(t *testing.T) {
	fakeAccounts(t, "root:x:0:0:root:/root:/bin/sh\n", "root:x:0:\ndevs:x:4243:alice,bob\n")
	if got := groupName(4243); got != "group 4243 (devs)" {
		t.Errorf("groupName(4243) = %q", got)
	}
	if got := groupName(4244); got != "group 4244" {
		t.Errorf("groupName(4244) = %q (a gid no group file should name)", got)
	}
	if os.Geteuid() != 0 {
		t.Skip("the end-to-end half needs root: only root can give a file any group (CI runs as root)")
	}
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte("x\n"), 0o620); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o620); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 0, 4243); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(p, 1<<10); err == nil || !strings.Contains(err.Error(), "(mode 0620, group 4243 (devs) may write it)") {
		t.Errorf("group-writable by devs: %v", err)
	}
}

package opfile

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAWayPastPathMaxIsRefused: a name whose way, once its links are
// followed, is longer than PATH_MAX opens (the kernel follows each link
// from where it stands) while the walk's Lstat of the whole path fails
// with ENAMETOOLONG. The directories past that point cannot be judged,
// so the file is refused, not read: here the last of them is 0777, and
// whoever may write there could replace the token.
func TestAWayPastPathMaxIsRefused(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// s1 -> d1, s2 -> s1/d2, ...: each link short, the way d1/d2/...
	// 18 names of 240 bytes, past 4096 bytes.
	prev := ""
	for i := 1; i <= 18; i++ {
		d := strings.Repeat(string(rune('a'+i)), 240)
		target := d
		if prev != "" {
			target = prev + "/" + d
		}
		must(os.Mkdir(filepath.Join(dir, target), 0o755))
		prev = "s" + string(rune('a'+i))
		must(os.Symlink(target, filepath.Join(dir, prev)))
	}
	deep := filepath.Join(dir, prev)
	must(os.Chmod(deep+"/", 0o777))
	name := filepath.Join(deep, "token")
	must(os.WriteFile(name, []byte("secret\n"), 0o600))
	if real, err := filepath.EvalSymlinks(deep); err == nil && len(real) < 4096 {
		t.Fatalf("the way is %d bytes: the test needs one past PATH_MAX", len(real))
	}
	if f, err := os.Open(name); err != nil {
		t.Fatalf("the kernel opens %s: %v", name, err)
	} else {
		f.Close()
	}
	_, err := Read(name, 1024)
	if err == nil || !errors.Is(err, syscall.ENAMETOOLONG) || !strings.Contains(err.Error(), "cannot be judged") {
		t.Fatalf("Read of a file past PATH_MAX, in a 0777 directory: %v, want a refusal (cannot be judged: file name too long)", err)
	}
}

// TestUnsearchableAboveTheWorkingDirectoryIsRefused: a relative name in
// a working directory below one this process's user may not search
// opens (the open starts from the working directory), while the walk's
// Lstat of the absolute path fails with EACCES. The working directory
// cannot be judged, so the file is refused: here it is 0777, and whoever
// may write there could replace the token. Run as uid 65534 (a child of
// this test binary), which needs root.
func TestUnsearchableAboveTheWorkingDirectoryIsRefused(t *testing.T) {
	if os.Getenv("OPFILE_CWD_CHILD") != "" {
		cwdChild()
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the child runs as another uid")
	}
	top := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(filepath.Dir(top), 0o755)) // testing's directory of temporary ones
	must(os.Chmod(top, 0o755))
	outer := filepath.Join(top, "outer")
	cwd := filepath.Join(outer, "cwd")
	must(os.MkdirAll(cwd, 0o755))
	must(os.Chmod(cwd, 0o777))
	token := filepath.Join(cwd, "token")
	must(os.WriteFile(token, []byte("secret\n"), 0o600))
	must(os.Chown(token, nobody, nobody))
	// The test binary, where uid 65534 may run it.
	bin := filepath.Join(top, "opfile.test")
	data, err := os.ReadFile(os.Args[0])
	must(err)
	must(os.WriteFile(bin, data, 0o755))
	cmd := exec.Command(bin, "-test.run=^TestUnsearchableAboveTheWorkingDirectoryIsRefused$")
	cmd.Env = append(os.Environ(), "OPFILE_CWD_CHILD="+cwd)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	stdin, err := cmd.StdinPipe()
	must(err)
	stdout, err := cmd.StdoutPipe()
	must(err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	must(cmd.Start())
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "in" {
		t.Fatalf("the child did not enter %s: %q %s", cwd, lines.Text(), stderr.String())
	}
	must(os.Chmod(outer, 0o700)) // root's: uid 65534 may no longer search it
	stdin.Write([]byte("go\n"))
	var out []string
	for lines.Scan() {
		out = append(out, lines.Text())
	}
	cmd.Wait()
	got := strings.Join(out, "\n")
	if !strings.Contains(got, "opened: yes") {
		t.Fatalf("the child could not open ./token at all (the case needs the open to succeed): %s %s", got, stderr.String())
	}
	if !strings.Contains(got, "read: refused") || !strings.Contains(got, "cannot be judged") {
		t.Fatalf("Read(\"token\") in a 0777 working directory below an unsearchable one: %s, want a refusal (cannot be judged)", got)
	}
}

// cwdChild is the child of TestUnsearchableAboveTheWorkingDirectoryIsRefused:
// it enters the directory, waits for the parent to close the one above,
// then opens and reads ./token.
func cwdChild() {
	if err := os.Chdir(os.Getenv("OPFILE_CWD_CHILD")); err != nil {
		os.Stdout.WriteString("chdir: " + err.Error() + "\n")
		return
	}
	os.Stdout.WriteString("in\n")
	bufio.NewReader(os.Stdin).ReadString('\n')
	if f, err := os.Open("token"); err == nil {
		f.Close()
		os.Stdout.WriteString("opened: yes\n")
	} else {
		os.Stdout.WriteString("opened: " + err.Error() + "\n")
	}
	if _, err := Read("token", 1024); err != nil {
		os.Stdout.WriteString("read: refused: " + err.Error() + "\n")
		if !errors.Is(err, fs.ErrPermission) {
			os.Stdout.WriteString("not a permission error\n")
		}
	} else {
		os.Stdout.WriteString("read: accepted\n")
	}
}

// TestNamePlantedBeforeTheOpenIsRefused: in a sticky directory others
// may write, a name missing when Read first judges it (the walk ends
// there without an error) and planted before the open, a link of another
// user to a file the rule passes (root's, 0600), is refused: the way is
// judged again once the file is open, and must lead to it. Without that,
// the daemon reads root's file through the other user's link.
func TestNamePlantedBeforeTheOpenIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a link to another user")
	}
	top := t.TempDir()
	sticky := stickyDir(t, top)
	secret := filepath.Join(top, "secret")
	if err := os.WriteFile(secret, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(sticky, "token")
	beforeOpen = func(n string) {
		if n != name {
			return
		}
		if err := os.Symlink(secret, name); err != nil {
			t.Error(err)
		}
		if err := os.Lchown(name, nobody, nobody); err != nil {
			t.Error(err)
		}
	}
	defer func() { beforeOpen = nil }()
	data, err := Read(name, 1024)
	if err == nil || !strings.Contains(err.Error(), "is owned by uid 65534") {
		t.Fatalf("Read of a name another user planted between the check and the open: %q, %v; want it refused by the link's owner", data, err)
	}
	// Root's own link, put there the same way, reads, and ReadWhere says
	// where it led.
	os.Remove(name)
	beforeOpen = func(n string) {
		if n == name {
			os.Symlink(secret, name)
		}
	}
	if _, at, err := ReadWhere(name, 1024); err != nil || at != secret {
		t.Fatalf("ReadWhere through root's own link: %q, %v; want %s", at, err, secret)
	}
}

// TestHardLinkInAStickyDirectoryIsRefused: a hard link, in a sticky
// directory others may write, to a file the rule passes (root's, 0600)
// is refused: its owner is the file's, not whoever made the name, and
// where fs.protected_hardlinks is 0 another user may make it. The same
// file under its one name there, and a hard link in a directory only its
// owner may write, pass.
func TestHardLinkInAStickyDirectoryIsRefused(t *testing.T) {
	top := t.TempDir()
	sticky := stickyDir(t, top)
	own := filepath.Join(sticky, "own")
	if err := os.WriteFile(own, []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(own, 1024); err != nil {
		t.Fatalf("a file of one link in a sticky directory: %v", err)
	}
	secret := filepath.Join(top, "secret")
	if err := os.WriteFile(secret, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	linked := filepath.Join(sticky, "token")
	if err := os.Link(secret, linked); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(linked, 1024); err == nil || !strings.Contains(err.Error(), "has 2 hard links and lies in "+sticky) {
		t.Fatalf("a hard link in a sticky directory: %v, want it refused", err)
	}
	if _, err := Read(secret, 1024); err != nil {
		t.Fatalf("the same file, of two links, in a directory only root may write: %v", err)
	}
}

// stickyDir makes top/tmp as /tmp is: 1777, others may write it, each
// name's owner alone may remove it.
func stickyDir(t *testing.T, top string) string {
	t.Helper()
	sticky := filepath.Join(top, "tmp")
	if err := os.Mkdir(sticky, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return sticky
}

package opfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNotMapped: the overflow id is a user outside the namespace only
// where the map leaves ids out (unshare -r's "0 0 1", a rootless
// container's ranges); in the initial namespace ("0 0 4294967295") uid
// 65534 is nobody, a user like any other. Another id, or files that do
// not parse, are never called unmapped.
func TestNotMapped(t *testing.T) {
	const initial = "         0          0 4294967295\n"
	for _, tc := range []struct {
		name     string
		id       int
		overflow string
		idMap    string
		want     bool
	}{
		{"initial namespace", 65534, "65534\n", initial, false},
		{"unshare -r", 65534, "65534\n", "         0          0          1\n", true},
		{"rootless container", 65534, "65534\n", "0 1000 1\n1 100000 65536\n", true},
		{"another id", 1000, "65534\n", "0 0 1\n", false},
		{"another overflow id", 65534, "65533\n", "0 0 1\n", false},
		{"the full range in two lines", 65534, "65534\n", "0 0 2147483648\n2147483648 2147483648 2147483647\n", false},
		{"an overflow id that does not parse", 65534, "x\n", "0 0 1\n", false},
		{"a map that does not parse", 65534, "65534\n", "0 0\n", false},
	} {
		if got := notMapped(tc.id, []byte(tc.overflow), []byte(tc.idMap)); got != tc.want {
			t.Errorf("%s: notMapped(%d) = %v, want %v", tc.name, tc.id, got, tc.want)
		}
	}
}

// fakeNamespace points the user namespace's files at ones saying the
// overflow ids are 65534 and the maps hold idMap, until the test ends.
func fakeNamespace(t *testing.T, idMap string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := [4]string{uidMapFile, gidMapFile, overflowUIDFile, overflowGIDFile}
	uidMapFile, gidMapFile = write("uid_map", idMap), write("gid_map", idMap)
	overflowUIDFile, overflowGIDFile = write("overflowuid", "65534\n"), write("overflowgid", "65534\n")
	t.Cleanup(func() { uidMapFile, gidMapFile, overflowUIDFile, overflowGIDFile = old[0], old[1], old[2], old[3] })
}

// TestUnmappedOwnerIsSaid: in a user namespace that leaves ids out, a file
// or a directory owned by the overflow uid is refused saying its owner is
// not mapped into the namespace and how to put it right (copy it, or map
// the owner), not "chown root", which no one inside can do; a file its
// group may write, that group being the overflow gid, says the group is
// not mapped. In the initial namespace the same files name nobody.
func TestUnmappedOwnerIsSaid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a file to another user (CI runs as root)")
	}
	dir := t.TempDir()
	theirs := filepath.Join(dir, "theirs")
	theirDir := filepath.Join(dir, "theirdir")
	inTheirDir := filepath.Join(theirDir, "file")
	groups := filepath.Join(dir, "groups")
	for _, err := range []error{
		os.WriteFile(theirs, []byte("x\n"), 0o644),
		os.Chown(theirs, nobody, nobody),
		os.Mkdir(theirDir, 0o755),
		os.WriteFile(inTheirDir, []byte("x\n"), 0o644),
		os.Chown(theirDir, nobody, nobody),
		os.WriteFile(groups, []byte("x\n"), 0o620),
		os.Chmod(groups, 0o620),
		os.Chown(groups, 0, nobody),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	check := func(name string, want []string, notWant string) {
		t.Helper()
		_, err := Read(name, 1<<10)
		if err == nil {
			t.Fatalf("%s: read", name)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\nwant %q", name, err, w)
			}
		}
		if notWant != "" && strings.Contains(err.Error(), notWant) {
			t.Errorf("%s: %v\nwant no %q", name, err, notWant)
		}
	}
	fakeNamespace(t, "0 0 1\n")
	check(theirs, []string{"is owned by a user not mapped into this process's user namespace (shown as uid 65534, the overflow uid)", "copy it into a directory this process's user, uid 0 (root), owns", "map its owner into the namespace"}, "chown root")
	check(inTheirDir, []string{"a directory on its path, " + theirDir + ", is owned by a user not mapped into this process's user namespace", "copy the file into a directory this process's user (uid 0 (root)) owns"}, "chown root")
	check(groups, []string{"group 65534 (a group not mapped into this process's user namespace, whose members cannot be told) may write it", "chmod go-w " + groups}, "")

	fakeNamespace(t, "0 0 4294967295\n")
	check(theirs, []string{"is owned by uid 65534", "chown root " + theirs}, "not mapped")
	check(inTheirDir, []string{"is owned by uid 65534", "chown root " + theirDir}, "not mapped")
	check(groups, []string{"mode 0620, group 65534"}, "not mapped")
}

// TestUnmappedOwnerInUnshare runs Read in a child under unshare -r (a
// user namespace mapping root alone), on a file owned by nobody: there
// nobody is a user outside the namespace, shown as the overflow uid, and
// the refusal says so, read from the real /proc files.
func TestUnmappedOwnerInUnshare(t *testing.T) {
	if name := os.Getenv("OPFILE_UNSHARE_CHILD"); name != "" {
		_, err := Read(name, 1<<10)
		os.Stdout.WriteString("refusal: " + errString(err) + "\n")
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a file to another user (CI runs as root)")
	}
	if err := exec.Command("unshare", "-r", "true").Run(); err != nil {
		t.Skipf("unshare -r does not run here (no user namespaces for this process): %v", err)
	}
	p := filepath.Join(t.TempDir(), "theirs")
	if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-r", os.Args[0], "-test.run=^TestUnmappedOwnerInUnshare$")
	cmd.Env = append(os.Environ(), "OPFILE_UNSHARE_CHILD="+p)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "refusal: is owned by a user not mapped into this process's user namespace (shown as uid 65534, the overflow uid)") || strings.Contains(string(out), "chown root") {
		t.Errorf("in unshare -r: %s", out)
	}
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

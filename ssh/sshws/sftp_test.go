package sshws

import (
	"bytes"
	"crypto/rand"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/sshtest"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
)

// The SFTP status helpers and host file helpers are the shared ones.
var (
	fxCode    = sshtest.FxCode
	writeHost = sshtest.WriteHost
	readHost  = sshtest.ReadHost
)

const (
	fxOK          = sshtest.FxOK
	fxNoSuchFile  = sshtest.FxNoSuchFile
	fxPermission  = sshtest.FxPermission
	fxFailure     = sshtest.FxFailure
	fxUnsupported = sshtest.FxUnsupported
)

func TestSFTPOperations(t *testing.T) {
	e := newEnv(t)
	c := e.sftp(t)
	writeHost(t, e.root, "hello.txt", "hello world")
	writeHost(t, e.root, "dir/a.txt", "a")
	writeHost(t, e.root, "dir/b.txt", "bb")
	if err := os.Mkdir(filepath.Join(e.root, "dir/sub"), 0o755); err != nil {
		t.Fatal(err)
	}

	t.Run("read whole file, relative, rooted and host-absolute paths", func(t *testing.T) {
		for _, p := range []string{"hello.txt", "/hello.txt", e.root + "/hello.txt", "./dir/../hello.txt"} {
			f, err := c.Open(p)
			if err != nil {
				t.Fatalf("open %q: %v", p, err)
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil || string(b) != "hello world" {
				t.Fatalf("%q: %q %v", p, b, err)
			}
		}
	})

	t.Run("read at offset and EOF", func(t *testing.T) {
		f, err := c.Open("hello.txt")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 5)
		if n, err := f.ReadAt(buf, 6); n != 5 || string(buf) != "world" || (err != nil && err != io.EOF) {
			t.Fatalf("ReadAt: %d %q %v", n, buf, err)
		}
		if n, err := f.ReadAt(buf, 100); n != 0 || err != io.EOF {
			t.Fatalf("ReadAt past end: %d %v, want EOF", n, err)
		}
	})

	t.Run("create writes and creates parents", func(t *testing.T) {
		f, err := c.Create("new/deep/file.txt")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("content")); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("C"), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got := readHost(t, e.root, "new/deep/file.txt"); got != "Content" {
			t.Fatalf("host sees %q", got)
		}
	})

	t.Run("open flags", func(t *testing.T) {
		// TRUNC replaces.
		f, err := c.OpenFile("hello2.txt", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("first version"))
		f.Close()
		f, _ = c.OpenFile("hello2.txt", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		f.Write([]byte("v2"))
		f.Close()
		if got := readHost(t, e.root, "hello2.txt"); got != "v2" {
			t.Fatalf("after TRUNC: %q", got)
		}
		// APPEND writes at the end whatever the offset.
		f, err = c.OpenFile("hello2.txt", os.O_WRONLY|os.O_APPEND)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("+tail"), 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if got := readHost(t, e.root, "hello2.txt"); got != "v2+tail" {
			t.Fatalf("after APPEND: %q", got)
		}
		// EXCL on an existing file fails.
		if _, err := c.OpenFile("hello2.txt", os.O_WRONLY|os.O_CREATE|os.O_EXCL); fxCode(err) != fxFailure {
			t.Fatalf("EXCL on existing: %v", err)
		}
		// WRITE without CREAT on a missing file: no such file.
		if _, err := c.OpenFile("missing.txt", os.O_WRONLY); fxCode(err) != fxNoSuchFile {
			t.Fatalf("WRITE missing: %v", err)
		}
		// READ|WRITE handle reads back what it wrote.
		f, err = c.OpenFile("rw.txt", os.O_RDWR|os.O_CREATE)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("abc"))
		buf := make([]byte, 3)
		if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF || string(buf) != "abc" {
			t.Fatalf("rw read back %q %v", buf, err)
		}
		f.Close()
	})

	t.Run("stat lstat fstat", func(t *testing.T) {
		fi, err := c.Stat("dir/b.txt")
		if err != nil || fi.Size() != 2 || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
			t.Fatalf("stat: %v %v", fi, err)
		}
		host, _ := os.Stat(filepath.Join(e.root, "dir/b.txt"))
		if !fi.ModTime().Equal(host.ModTime().Truncate(time.Second)) {
			t.Errorf("mtime %v, host %v", fi.ModTime(), host.ModTime())
		}
		di, err := c.Stat("dir")
		if err != nil || !di.IsDir() {
			t.Fatalf("stat dir: %v %v", di, err)
		}
		ri, err := c.Stat("/")
		if err != nil || !ri.IsDir() {
			t.Fatalf("stat root: %v %v", ri, err)
		}
		if err := os.Symlink("dir/a.txt", filepath.Join(e.root, "link")); err != nil {
			t.Fatal(err)
		}
		li, err := c.Lstat("link")
		if err != nil || li.Mode()&fs.ModeSymlink == 0 {
			t.Fatalf("lstat link: %v %v", li, err)
		}
		si, err := c.Stat("link")
		if err != nil || !si.Mode().IsRegular() || si.Size() != 1 {
			t.Fatalf("stat link: %v %v", si, err)
		}
		f, _ := c.Open("hello.txt")
		defer f.Close()
		if fi, err := f.Stat(); err != nil || fi.Size() != 11 {
			t.Fatalf("fstat: %v %v", fi, err)
		}
		if _, err := c.Stat("nope"); fxCode(err) != fxNoSuchFile {
			t.Fatalf("stat missing: %v", err)
		}
		if _, err := c.Lstat("nope"); fxCode(err) != fxNoSuchFile {
			t.Fatalf("lstat missing: %v", err)
		}
	})

	t.Run("readdir", func(t *testing.T) {
		entries, err := c.ReadDir("dir")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, en := range entries {
			names = append(names, en.Name())
		}
		sort.Strings(names)
		if strings.Join(names, ",") != "a.txt,b.txt,sub" {
			t.Fatalf("names %v (no . or ..)", names)
		}
		for _, en := range entries {
			if en.Name() == "sub" && !en.IsDir() {
				t.Error("sub is not a directory")
			}
			if en.Name() == "b.txt" && en.Size() != 2 {
				t.Error("b.txt size")
			}
		}
		if _, err := c.ReadDir("nope"); fxCode(err) != fxNoSuchFile {
			t.Fatalf("readdir missing: %v", err)
		}
		if _, err := c.ReadDir("hello.txt"); err == nil {
			t.Fatal("readdir of a file succeeded")
		}
	})

	t.Run("readdir of a large directory", func(t *testing.T) {
		for i := range 300 {
			writeHost(t, e.root, filepath.Join("big", strings.Repeat("x", i%7)+string(rune('a'+i%26))+"-"+itoa(i)), "")
		}
		entries, err := c.ReadDir("big")
		if err != nil || len(entries) != 300 {
			t.Fatalf("%d entries, %v", len(entries), err)
		}
	})

	t.Run("mkdir rmdir", func(t *testing.T) {
		if err := c.Mkdir("made"); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(filepath.Join(e.root, "made")); err != nil || !fi.IsDir() {
			t.Fatal("not made")
		}
		if err := c.Mkdir("made"); fxCode(err) != fxFailure {
			t.Fatalf("mkdir existing: %v", err)
		}
		if err := c.Mkdir("nope/child"); fxCode(err) != fxNoSuchFile {
			t.Fatalf("mkdir without parent: %v", err)
		}
		if err := c.MkdirAll("p/q/r"); err != nil {
			t.Fatal(err)
		}
		if err := c.RemoveDirectory("p"); fxCode(err) != fxFailure {
			t.Fatalf("rmdir non-empty: %v", err)
		}
		if _, err := os.Stat(filepath.Join(e.root, "p/q/r")); err != nil {
			t.Fatal("rmdir of a non-empty directory removed something")
		}
		if err := c.RemoveDirectory("hello.txt"); fxCode(err) != fxFailure {
			t.Fatalf("rmdir of a file: %v", err)
		}
		if err := c.RemoveDirectory("nope"); fxCode(err) != fxNoSuchFile {
			t.Fatalf("rmdir missing: %v", err)
		}
		if err := c.RemoveDirectory("/"); err == nil {
			t.Fatal("rmdir of the root succeeded")
		}
		if err := c.RemoveDirectory("made"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(e.root, "made")); !os.IsNotExist(err) {
			t.Fatal("still there")
		}
	})

	t.Run("remove", func(t *testing.T) {
		writeHost(t, e.root, "gone.txt", "x")
		if err := c.Remove("gone.txt"); err != nil {
			t.Fatal(err)
		}
		if err := c.Remove("gone.txt"); fxCode(err) != fxNoSuchFile {
			t.Fatalf("remove missing: %v", err)
		}
		// pkg/sftp's Remove falls back to RMDIR on failure; send REMOVE alone
		// through the raw request to see that it refuses directories.
		if err := c.Mkdir("keepdir"); err != nil {
			t.Fatal(err)
		}
		writeHost(t, e.root, "keepdir/x", "x")
		if err := c.Remove("keepdir"); err == nil {
			t.Fatal("remove of a non-empty directory succeeded")
		}
	})

	t.Run("rename replaces and creates the parent; posix-rename", func(t *testing.T) {
		writeHost(t, e.root, "r1.txt", "one")
		writeHost(t, e.root, "r2.txt", "two")
		if err := c.Rename("r1.txt", "r2.txt"); err != nil {
			t.Fatalf("rename over an existing file: %v", err)
		}
		if got := readHost(t, e.root, "r2.txt"); got != "one" {
			t.Fatalf("r2 = %q", got)
		}
		if err := c.Rename("r2.txt", "moved/into/r3.txt"); err != nil {
			t.Fatal(err)
		}
		if got := readHost(t, e.root, "moved/into/r3.txt"); got != "one" {
			t.Fatalf("r3 = %q", got)
		}
		writeHost(t, e.root, "p1.txt", "p")
		if err := c.PosixRename("p1.txt", "moved/into/r3.txt"); err != nil {
			t.Fatal(err)
		}
		if got := readHost(t, e.root, "moved/into/r3.txt"); got != "p" {
			t.Fatalf("after posix-rename %q", got)
		}
		if err := c.Rename("nope", "x"); fxCode(err) != fxNoSuchFile {
			t.Fatalf("rename missing: %v", err)
		}
	})

	t.Run("setstat: chmod chtimes truncate", func(t *testing.T) {
		writeHost(t, e.root, "s.txt", "123456")
		if err := c.Chmod("s.txt", 0o600); err != nil {
			t.Fatal(err)
		}
		if err := c.Truncate("s.txt", 3); err != nil {
			t.Fatal(err)
		}
		mt := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		if err := c.Chtimes("s.txt", mt, mt); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(e.root, "s.txt"))
		if err != nil || fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(mt) || fi.Size() != 3 {
			t.Fatalf("host sees %v %v %v", fi.Mode(), fi.ModTime(), fi.Size())
		}
		// FSETSTAT through a handle.
		f, err := c.OpenFile("s.txt", os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Chmod(0o640); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(1); err != nil {
			t.Fatal(err)
		}
		f.Close()
		fi, _ = os.Stat(filepath.Join(e.root, "s.txt"))
		if fi.Mode().Perm() != 0o640 || fi.Size() != 1 {
			t.Fatalf("after fsetstat %v %d", fi.Mode(), fi.Size())
		}
		if err := c.Chmod("nope", 0o600); fxCode(err) != fxNoSuchFile {
			t.Fatalf("chmod missing: %v", err)
		}
		// chown is accepted and ignored (as `sftp put -p` expects).
		if err := c.Chown("s.txt", 12345, 12345); err != nil {
			t.Fatalf("chown: %v", err)
		}
	})

	t.Run("realpath", func(t *testing.T) {
		tests := map[string]string{
			".":                   "/",
			"":                    "/",
			"/":                   "/",
			"dir":                 "/dir",
			"dir/../hello.txt":    "/hello.txt",
			e.root + "/dir":       "/dir",
			"../..":               "/", // chroot: cannot climb above the root
			"not/yet/created.txt": "/not/yet/created.txt",
		}
		for in, want := range tests {
			got, err := c.RealPath(in)
			if err != nil || got != want {
				t.Errorf("RealPath(%q) = %q %v, want %q", in, got, err, want)
			}
		}
		if wd, err := c.Getwd(); err != nil || wd != "/" {
			t.Fatalf("Getwd = %q %v", wd, err)
		}
	})

	t.Run("symlink readlink", func(t *testing.T) {
		if err := c.Symlink("dir/a.txt", "alink"); err != nil {
			t.Fatal(err)
		}
		if got, err := c.ReadLink("alink"); err != nil || got != "dir/a.txt" {
			t.Fatalf("readlink %q %v", got, err)
		}
		f, err := c.Open("alink")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(f)
		f.Close()
		if string(b) != "a" {
			t.Fatalf("through link: %q", b)
		}
		if _, err := c.ReadLink("hello.txt"); err == nil {
			t.Fatal("readlink of a regular file succeeded")
		}
		if err := c.Link("hello.txt", "hard"); fxCode(err) != fxUnsupported {
			t.Fatalf("hard link: %v", err)
		}
	})

	t.Run("statvfs", func(t *testing.T) {
		st, err := c.StatVFS("/")
		if err != nil {
			t.Fatal(err)
		}
		if st.Bsize == 0 || st.Blocks == 0 || st.Namemax == 0 {
			t.Fatalf("statvfs %+v", st)
		}
		if _, err := c.StatVFS("nope"); fxCode(err) != fxNoSuchFile {
			t.Fatalf("statvfs missing: %v", err)
		}
	})
}

func TestSFTPEscapes(t *testing.T) {
	e := newEnv(t)
	sshtest.SFTPEscapes(t, e.sftp(t), e.root)
}

// TestSFTPLargeFile moves 32 MiB each way and checks it byte for byte.
func TestSFTPLargeFile(t *testing.T) {
	e := newEnv(t)
	c := e.sftp(t)
	data := make([]byte, 32<<20)
	rand.Read(data)
	f, err := c.Create("big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.ReadFile(filepath.Join(e.root, "big.bin"))
	if !bytes.Equal(host, data) {
		t.Fatal("upload corrupted")
	}
	g, err := c.Open("big.bin")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := g.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	g.Close()
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatal("download corrupted")
	}
}

func itoa(i int) string {
	return strings.TrimLeft(string([]byte{byte('0' + i/100), byte('0' + i/10%10), byte('0' + i%10)}), "")
}

// TestScopedWorkspace serves a static scope (--scopePath): SFTP's "/" and
// the commands' working directory are the scope, and its siblings are out
// of reach.
func TestScopedWorkspace(t *testing.T) {
	base := newEnv(t)
	writeHost(t, base.root, "users/u2/secret.txt", "u2")
	scope, err := base.ws.Scope("users/u1")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: base.root})
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	e := startEnv(t, scope.Root(), scope, Options{}, sshd.Config{Workspace: scope, Executor: ex, HostKey: sshtest.HostKey(t)})
	c := e.dial(t, "")
	sc, err := newSFTP(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()

	f, err := sc.Create("/notes.txt")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("in scope"))
	f.Close()
	if got := readHost(t, base.root, "users/u1/notes.txt"); got != "in scope" {
		t.Fatalf("host sees %q", got)
	}
	if wd, err := sc.RealPath("."); err != nil || wd != "/" {
		t.Fatalf("realpath %q %v", wd, err)
	}
	for _, p := range []string{"../u2/secret.txt", "/../u2/secret.txt", base.root + "/users/u2/secret.txt"} {
		if g, err := sc.Open(p); err == nil {
			b, _ := io.ReadAll(g)
			g.Close()
			t.Fatalf("read %q through the scope: %q", p, b)
		}
	}
	out, _, code, _ := run(t, c, "pwd; cat notes.txt", "")
	if code != 0 || out != filepath.Join(base.root, "users/u1")+"\nin scope" {
		t.Fatalf("exec in scope: %q %d", out, code)
	}
	if _, errOut, code, _ := run(t, c, "cat ../u2/secret.txt", ""); code == 0 {
		t.Fatalf("exec read a sibling scope (stderr %q)", errOut)
	}
}

// TestSFTPSymlinkThroughLinkedParent: SYMLINK judges a relative target from
// the directory the link really lands in. "up/down" leads back to the root,
// so "up/down/l" -> "../outside" would point out of the workspace although
// it is lexically "up/outside".
func TestSFTPSymlinkThroughLinkedParent(t *testing.T) {
	e := newEnv(t)
	c := e.sftp(t)
	if err := os.MkdirAll(filepath.Join(e.root, "up"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..", filepath.Join(e.root, "up/down")); err != nil {
		t.Fatal(err)
	}
	writeHost(t, e.root, "data/f.txt", "inside")
	for _, tc := range []struct {
		target, link string
		code         uint32
	}{
		{"../outside", "up/down/l1", fxPermission},
		{"../../etc/passwd", "up/down/l2", fxPermission},
		{"data/f.txt", "up/down/l3", fxOK},
	} {
		if err := c.Symlink(tc.target, tc.link); fxCode(err) != tc.code {
			t.Errorf("SYMLINK %s -> %s: %v, want status %d", tc.link, tc.target, err, tc.code)
		}
	}
	for _, name := range []string{"l1", "l2"} {
		if _, err := os.Lstat(filepath.Join(e.root, name)); err == nil {
			t.Errorf("the refused link %s was planted", name)
		}
	}
	if got := readHost(t, e.root, "l3"); got != "inside" {
		t.Errorf("l3 reads %q", got)
	}
}

// Over a real connection, a malformed SFTP packet ends that session (the
// channel closes; the connection stays usable) and the daemon's log says
// why and who: the operator looking into "my upload stopped" sees it.
func TestSFTPMalformedIsLogged(t *testing.T) {
	for _, tc := range []struct {
		name, packet, inLog string
	}{
		{"zero length", "\x00\x00\x00\x00", "malformed packet: length 0"},
		{"over the limit", "\x00\x10\x00\x00", "packet too long: 1048576 bytes, over the 262144-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncbuf.Buffer
			e := newEnv(t, withOpts(func(o *Options) {
				o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}))
			c := e.dial(t, "")
			s, err := c.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			stdin, _ := s.StdinPipe()
			stdout, _ := s.StdoutPipe()
			if err := s.RequestSubsystem("sftp"); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(stdin, tc.packet); err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(stdout); err != nil || len(b) != 0 {
				t.Fatalf("answer %q, %v; want the session to end without one", b, err)
			}
			s.Wait()
			for _, want := range []string{"level=WARN", "sftp session ended: the client sent a malformed packet", tc.inLog, "remote=127.0.0.1:"} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log lacks %q:\n%s", want, logs.String())
				}
			}
			// The connection carries on.
			if out, _, code, _ := run(t, c, "echo still here", ""); out != "still here\n" || code != 0 {
				t.Errorf("after the bad session: %q %d", out, code)
			}
		})
	}
}

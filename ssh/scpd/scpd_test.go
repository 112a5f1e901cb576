package scpd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
)

func TestParseCommand(t *testing.T) {
	ok := []struct {
		line string
		want Command
	}{
		{"scp -t .", Command{Sink: true, Paths: []string{"."}, Patterns: []string{""}}},
		{"scp -v -r -p -d -t -- 'my dir'", Command{Sink: true, Recursive: true, Preserve: true, TargetDir: true,
			Paths: []string{"my dir"}, Patterns: []string{""}}},
		{"/usr/bin/scp -rf \"a b\" 'c'\"d\" e\\ f", Command{Source: true, Recursive: true,
			Paths: []string{"a b", "cd", "e f"}, Patterns: []string{"", "", ""}}},
		{"scp -f *.txt", Command{Source: true, Paths: []string{"*.txt"}, Patterns: []string{"*.txt"}}},
		{"scp -f '*.txt' \"?\"", Command{Source: true, Paths: []string{"*.txt", "?"}, Patterns: []string{"", ""}}},
		{"scp -f 'a*'*", Command{Source: true, Paths: []string{"a**"}, Patterns: []string{`a\**`}}},
		{"scp -f ~/x ~ '~/y'", Command{Source: true, Paths: []string{"./x", ".", "~/y"}, Patterns: []string{"", "", ""}}},
		{"scp -t *.txt", Command{Sink: true, Paths: []string{"*.txt"}, Patterns: []string{""}}},
		{"scp -f a#b", Command{Source: true, Paths: []string{"a#b"}, Patterns: []string{""}}},
	}
	for _, c := range ok {
		got, err := ParseCommand(c.line)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseCommand(%q) = %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
	for _, line := range []string{"", "ls -la", "scp host:x y", "scp x host:y", "echo scp -t x", "scpx -t y", "scp -- -t x"} {
		if _, err := ParseCommand(line); !errors.Is(err, ErrNotSCP) {
			t.Errorf("ParseCommand(%q): %v, want ErrNotSCP", line, err)
		}
	}
	bad := map[string]string{
		"scp -t a b":            "-t takes one target path, got 2",
		"scp -t":                "-t takes one target path, got 0",
		"scp -f":                "-f needs at least one path",
		"scp -t -f x":           "-t and -f together",
		"scp -l -t x":           "option -l is not supported",
		"scp -t x; rm -rf /":    `';': the scp server does not run a shell`,
		"scp -f $(id)":          `'$': the scp server does not run a shell`,
		"scp -f \"a$HOME\"":     `'$' inside double quotes`,
		"scp -f \"a`id`\"":      "'`' inside double quotes",
		"scp -t 'unterminated":  "unterminated ' quote",
		"scp -t \"unterminated": "unterminated \" quote",
		"scp -f a|b":            `'|': the scp server does not run a shell`,
		"scp -f a>b":            `'>': the scp server does not run a shell`,
		"scp -f {a,b}":          `'{': the scp server does not run a shell`,
		"scp -f a\\":            "trailing backslash",
		"scp -f a\x00b":         `'\x00': the scp server does not run a shell`,
		"scp -f " + strings.Repeat("a", maxCommandBytes): "command longer than",
	}
	for line, want := range bad {
		if _, err := ParseCommand(line); err == nil || errors.Is(err, ErrNotSCP) || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCommand(%.40q): %v, want an error containing %q", line, err, want)
		}
	}
}

// workspace is a directory workspace in a fresh directory, inside a parent
// the tests check nothing escapes to.
func workspace(t *testing.T) (fsops.Workspace, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, root
}

// peer is the client side of a session running on the other end of a pipe.
type peer struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
	done chan error
	sess *Session
}

func serve(t *testing.T, ws fsops.Workspace, line string) *peer {
	t.Helper()
	cmd, err := ParseCommand(line)
	if err != nil {
		t.Fatalf("ParseCommand(%q): %v", line, err)
	}
	a, b := net.Pipe()
	p := &peer{t: t, conn: a, r: bufio.NewReader(a), done: make(chan error, 1)}
	p.sess = NewSession(context.Background(), ws, cmd, b, nil)
	go func() {
		err := p.sess.Serve()
		b.Close()
		p.done <- err
	}()
	t.Cleanup(func() { a.Close() })
	a.SetDeadline(time.Now().Add(10 * time.Second))
	return p
}

func (p *peer) send(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.conn, s); err != nil {
		p.t.Fatalf("send %q: %v", s, err)
	}
}

// status reads one answer: "" for ok, else the message.
func (p *peer) status() string {
	p.t.Helper()
	c, err := p.r.ReadByte()
	if err != nil {
		p.t.Fatalf("reading a status: %v", err)
	}
	if c == 0 {
		return ""
	}
	line, err := p.r.ReadString('\n')
	if err != nil {
		p.t.Fatalf("reading a status message: %v", err)
	}
	return fmt.Sprintf("%d:%s", c, strings.TrimSuffix(line, "\n"))
}

func (p *peer) ok() {
	p.t.Helper()
	if s := p.status(); s != "" {
		p.t.Fatalf("status %q, want ok", s)
	}
}

// end closes the client side and returns Serve's error and the exit code.
func (p *peer) end() (int, error) {
	p.t.Helper()
	p.conn.Close()
	select {
	case err := <-p.done:
		return p.sess.ExitCode(), err
	case <-time.After(10 * time.Second):
		p.t.Fatal("the session did not end")
		return 0, nil
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noStrays fails if dir holds anything but want (temporary files left).
func noStrays(t *testing.T, dir string, want ...string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%s holds %v, want %v", dir, got, want)
	}
}

func TestSinkWritesFilesAndTrees(t *testing.T) {
	ws, root := workspace(t)
	p := serve(t, ws, "scp -r -p -t .")
	p.ok()
	p.send("C0640 5 a.txt\n")
	p.ok()
	p.send("hello\x00")
	p.ok()
	p.send("T1000000000 0 1000000001 0\n")
	p.ok()
	p.send("D0755 0 dir\n")
	p.ok()
	p.send("C0600 3 b.txt\n")
	p.ok()
	p.send("bye\x00")
	p.ok()
	p.send("E\n")
	p.ok()
	if code, err := p.end(); err != nil || code != 0 {
		t.Fatalf("Serve: %v, exit %d", err, code)
	}
	if readFile(t, filepath.Join(root, "a.txt")) != "hello" || readFile(t, filepath.Join(root, "dir", "b.txt")) != "bye" {
		t.Fatal("contents")
	}
	if fi, _ := os.Stat(filepath.Join(root, "a.txt")); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640 (-p)", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(root, "dir")); fi.ModTime().Unix() != 1000000000 {
		t.Fatalf("directory mtime %v, want the T record's", fi.ModTime())
	}
	noStrays(t, root, "a.txt", "dir")
	noStrays(t, filepath.Join(root, "dir"), "b.txt")
}

func TestSinkTargetIsTheFile(t *testing.T) {
	ws, root := workspace(t)
	os.WriteFile(filepath.Join(root, "keep.txt"), []byte("old"), 0o604)
	os.Chmod(filepath.Join(root, "keep.txt"), 0o604) // whatever the umask
	p := serve(t, ws, "scp -t keep.txt")
	p.ok()
	p.send("C0777 3 whatever-name\n")
	p.ok()
	p.send("new\x00")
	p.ok()
	p.end()
	if readFile(t, filepath.Join(root, "keep.txt")) != "new" {
		t.Fatal("the target file was not replaced")
	}
	// Without -p an existing file keeps its mode, as with scp.
	if fi, _ := os.Stat(filepath.Join(root, "keep.txt")); fi.Mode().Perm() != 0o604 {
		t.Fatalf("mode %v, want the old 0604", fi.Mode())
	}
	noStrays(t, root, "keep.txt")
}

// TestSinkRefusesBadNames: a record's name is one path element; anything
// else ends the session before a byte is written.
func TestSinkRefusesBadNames(t *testing.T) {
	for _, name := range []string{"..", "../x", "a/b", "/etc/passwd", "", "a\x00b"} {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			ws, root := workspace(t)
			p := serve(t, ws, "scp -r -t .")
			p.ok()
			p.send("C0644 1 " + name + "\n")
			if s := p.status(); !strings.Contains(s, "unexpected filename") {
				t.Fatalf("status %q", s)
			}
			if code, err := p.end(); !errors.Is(err, errFatal) || code != 1 {
				t.Fatalf("Serve: %v, exit %d", err, code)
			}
			noStrays(t, root)
			noStrays(t, filepath.Dir(root), "ws")
		})
	}
}

func TestSinkProtocolErrors(t *testing.T) {
	cases := map[string]struct {
		cmd, send, want string
	}{
		"a directory without -r": {"scp -t .", "D0755 0 d\n", "received directory without -r"},
		"a bad mode":             {"scp -t .", "C08x4 1 a\n", "bad mode"},
		"a bad size":             {"scp -t .", "C0644 -1 a\n", "bad size"},
		"a huge size":            {"scp -t .", "C0644 99999999999999999999 a\n", "size out of range"},
		"no size":                {"scp -t .", "C0644 a\n", "size not delimited"},
		"a bad T record":         {"scp -t .", "T1 2 3\n", "bad T record"},
		"a T record's usec":      {"scp -t .", "T1 1000000 3 0\n", "out of range"},
		"a long line":            {"scp -t .", "C0644 1 " + strings.Repeat("n", MaxLineBytes) + "\n", "longer than"},
		"not scp at all":         {"scp -t .", "bash: scp: command not found\n", "bash: scp: command not found"},
		"a stray byte":           {"scp -r -t .", "T1 0 1 0\nX\n", "expected control record"},
		"a bare newline":         {"scp -t .", "\n", "unexpected <newline>"},
		"-d with a file target":  {"scp -d -t f", "", "f: Not a directory"},
		"-d with no target":      {"scp -d -t nope", "", "nope: No such file or directory"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			ws, root := workspace(t)
			os.WriteFile(filepath.Join(root, "f"), nil, 0o644)
			p := serve(t, ws, c.cmd)
			if c.send != "" {
				p.ok()
				go io.WriteString(p.conn, c.send)
			}
			var s string
			for s = p.status(); s == ""; s = p.status() {
				// a T record's ok
			}
			if !strings.Contains(s, c.want) {
				t.Fatalf("status %q, want %q", s, c.want)
			}
			if code, _ := p.end(); code != 1 {
				t.Fatalf("exit %d", code)
			}
			noStrays(t, root, "f")
		})
	}
}

// TestSinkKeepsOldFileOnFailure: an upload the client could not finish, or
// that a dropped connection cut, leaves the old file and no temporary one.
func TestSinkKeepsOldFileOnFailure(t *testing.T) {
	t.Run("the client reports an error after the data", func(t *testing.T) {
		ws, root := workspace(t)
		os.WriteFile(filepath.Join(root, "a"), []byte("old"), 0o644)
		p := serve(t, ws, "scp -t a")
		p.ok()
		p.send("C0644 4 a\n")
		p.ok()
		p.send("\x00\x00\x00\x00\x01scp: a: Input/output error\n")
		if s := p.status(); !strings.Contains(s, "not written") {
			t.Fatalf("status %q", s)
		}
		if code, err := p.end(); err != nil || code != 1 {
			t.Fatalf("Serve: %v, exit %d", err, code)
		}
		if readFile(t, filepath.Join(root, "a")) != "old" {
			t.Fatal("the old file was replaced")
		}
		noStrays(t, root, "a")
	})
	t.Run("the connection drops mid-file", func(t *testing.T) {
		ws, root := workspace(t)
		os.WriteFile(filepath.Join(root, "a"), []byte("old"), 0o644)
		p := serve(t, ws, "scp -t a")
		p.ok()
		p.send("C0644 1000000 a\n")
		p.ok()
		p.send(strings.Repeat("x", 100000))
		if _, err := p.end(); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("Serve: %v", err)
		}
		if readFile(t, filepath.Join(root, "a")) != "old" {
			t.Fatal("the old file was replaced")
		}
		noStrays(t, root, "a")
	})
	t.Run("a directory in the way", func(t *testing.T) {
		ws, root := workspace(t)
		os.Mkdir(filepath.Join(root, "d"), 0o755)
		os.Mkdir(filepath.Join(root, "d", "x"), 0o755)
		p := serve(t, ws, "scp -t d")
		p.ok()
		p.send("C0644 1 x\n")
		if s := p.status(); s != "1:scp: d/x: Is a directory" {
			t.Fatalf("status %q", s)
		}
		// The session goes on: the next file is fine.
		p.send("C0644 1 y\n")
		p.ok()
		p.send("y\x00")
		p.ok()
		if code, _ := p.end(); code != 1 {
			t.Fatalf("exit %d, want 1 (one file failed)", code)
		}
		if readFile(t, filepath.Join(root, "d", "y")) != "y" {
			t.Fatal("the next file")
		}
	})
}

func TestSinkDepthBound(t *testing.T) {
	ws, _ := workspace(t)
	p := serve(t, ws, "scp -r -t .")
	p.ok()
	var last string
	for i := 0; i <= MaxDepth; i++ {
		p.send("D0755 0 d\n")
		if last = p.status(); last != "" {
			break
		}
	}
	if !strings.Contains(last, fmt.Sprintf("nested more than %d deep", MaxDepth)) {
		t.Fatalf("status %q", last)
	}
	p.end()
}

func TestSinkEscapes(t *testing.T) {
	ws, root := workspace(t)
	os.Symlink("..", filepath.Join(root, "up"))
	for _, target := range []string{"../x", "up/x", "up"} {
		p := serve(t, ws, "scp -r -t "+target)
		p.ok()
		p.send("C0644 1 x\n")
		if s := p.status(); !strings.Contains(s, "outside the workspace") {
			t.Errorf("target %q: status %q", target, s)
		}
		p.end()
	}
	noStrays(t, filepath.Dir(root), "ws")
}

// download runs a source command and collects what it sends, acknowledging
// everything; it returns the records (file data as "<n bytes>"), the
// warnings and the exit code.
func download(t *testing.T, ws fsops.Workspace, cmd string) (records, warnings []string, code int) {
	t.Helper()
	p := serve(t, ws, cmd)
	p.send("\x00")
	for {
		c, err := p.r.ReadByte()
		if err != nil {
			break
		}
		line, err := p.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading a record: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch c {
		case 1, 2:
			warnings = append(warnings, fmt.Sprintf("%d:%s", c, line))
			continue
		case 'C':
			var mode, size int64
			var name string
			fmt.Sscanf(line, "%o %d %s", &mode, &size, &name)
			records = append(records, "C"+line)
			p.send("\x00")
			data := make([]byte, size)
			if _, err := io.ReadFull(p.r, data); err != nil {
				t.Fatal(err)
			}
			records = append(records, string(data))
			if st := p.status(); st != "" {
				warnings = append(warnings, st)
			}
		default:
			records = append(records, string(c)+line)
		}
		p.send("\x00")
	}
	code, _ = p.end()
	return records, warnings, code
}

func TestSourceSendsFilesTreesAndGlobs(t *testing.T) {
	ws, root := workspace(t)
	os.WriteFile(filepath.Join(root, "a.log"), []byte("A"), 0o644)
	os.WriteFile(filepath.Join(root, "b.log"), []byte("BB"), 0o600)
	os.WriteFile(filepath.Join(root, ".hidden.log"), []byte("H"), 0o644)
	os.MkdirAll(filepath.Join(root, "d", "e"), 0o755)
	os.WriteFile(filepath.Join(root, "d", "e", "f"), []byte("F"), 0o644)
	// The records carry these modes, whatever the umask.
	for p, mode := range map[string]os.FileMode{"a.log": 0o644, ".hidden.log": 0o644, "d": 0o755, "d/e": 0o755, "d/e/f": 0o644} {
		os.Chmod(filepath.Join(root, p), mode)
	}

	recs, warns, code := download(t, ws, "scp -f *.log")
	if want := []string{"C0644 1 a.log", "A", "C0600 2 b.log", "BB"}; !reflect.DeepEqual(recs, want) || len(warns) != 0 || code != 0 {
		t.Fatalf("glob: %q %q %d, want %q", recs, warns, code, want)
	}
	recs, _, code = download(t, ws, "scp -r -f d")
	if want := []string{"D0755 0 d", "D0755 0 e", "C0644 1 f", "F", "E", "E"}; !reflect.DeepEqual(recs, want) || code != 0 {
		t.Fatalf("-r: %q %d, want %q", recs, code, want)
	}
	recs, _, _ = download(t, ws, "scp -p -f a.log")
	if len(recs) != 3 || !strings.HasPrefix(recs[0], "T") || !strings.HasSuffix(recs[0], " 0") {
		t.Fatalf("-p: %q", recs)
	}
	_, warns, code = download(t, ws, "scp -f d nope '*.log' ../x")
	want := []string{
		"1:scp: d: not a regular file",
		"1:scp: nope: No such file or directory",
		"1:scp: *.log: No such file or directory",
		"1:scp: ../x: path leads outside the workspace",
	}
	if !reflect.DeepEqual(warns, want) || code != 1 {
		t.Fatalf("failures: %q %d, want %q", warns, code, want)
	}
}

// TestSourceDepth: a recursive download through a symlink to an ancestor
// ends (the file system's link limit) with a warning instead of running
// forever, and so does a tree deeper than MaxDepth.
func TestSourceDepth(t *testing.T) {
	ws, root := workspace(t)
	deep := filepath.Join(root, "deep")
	for i := 0; i <= MaxDepth; i++ {
		deep = filepath.Join(deep, "d")
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	_, warns, code := download(t, ws, "scp -r -f deep")
	if code != 1 || len(warns) != 1 || !strings.Contains(warns[0], fmt.Sprintf("nested more than %d deep", MaxDepth)) {
		t.Fatalf("a tree deeper than MaxDepth: exit %d, warnings %q", code, warns)
	}
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	os.Symlink("..", filepath.Join(root, "d", "loop"))
	os.Symlink("/etc", filepath.Join(root, "d", "out"))
	recs, warns, code := download(t, ws, "scp -r -f d")
	if code != 1 || len(recs) == 0 {
		t.Fatalf("exit %d, %d records", code, len(recs))
	}
	var loop, out bool
	for _, w := range warns {
		loop = loop || strings.Contains(w, "too many levels of symbolic links")
		out = out || strings.Contains(w, "d/out: path leads outside the workspace")
	}
	if !loop || !out {
		t.Fatalf("warnings %q", warns)
	}
}

func TestSourceWaitsForTheClient(t *testing.T) {
	ws, root := workspace(t)
	os.WriteFile(filepath.Join(root, "a"), []byte("A"), 0o644)
	p := serve(t, ws, "scp -f a")
	p.send("\x02scp: I give up\n")
	if code, err := p.end(); !errors.Is(err, errFatal) || code != 1 {
		t.Fatalf("Serve: %v, exit %d", err, code)
	}
}

// FuzzParseCommand: any command line parses or is refused, without a
// panic, and what parses is well formed.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{"scp -t .", "scp -r -p -f 'a b' *.txt ~/x", "scp -f \"a\\\"b\"", "scp -t x; y", "scp -f a\\ b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := ParseCommand(line)
		if err != nil {
			return
		}
		if c.Sink == c.Source || len(c.Paths) == 0 || len(c.Paths) != len(c.Patterns) || (c.Sink && len(c.Paths) != 1) {
			t.Fatalf("ParseCommand(%q) = %+v", line, c)
		}
	})
}

// FuzzSink: whatever a client sends, the sink writes nothing outside its
// workspace, leaves no temporary file and no setuid, setgid or sticky bit
// (a record's mode has four octal digits), and ends.
func FuzzSink(f *testing.F) {
	f.Add([]byte("C0644 5 a.txt\nhello\x00"))
	f.Add([]byte("C4755 2 suid\nhi\x00D7777 0 d\nC6755 1 x\nx\x00E\n"))
	f.Add([]byte("T1 0 1 0\nC0644 3 t\nab"))
	f.Add([]byte("D0755 0 d\nT1 0 1 0\nC0644 1 x\nx\x00E\n"))
	f.Add([]byte("C0644 1 ../x\nx\x00"))
	f.Add([]byte("D0755 0 ..\nC0644 1 x\nx\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		parent := t.TempDir()
		root := filepath.Join(parent, "ws")
		os.Mkdir(root, 0o755)
		ws, err := fsops.NewDir(root, fsops.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		cmd, _ := ParseCommand("scp -r -p -t .")
		s := NewSession(context.Background(), ws, cmd, struct {
			io.Reader
			io.Writer
		}{bytes.NewReader(in), io.Discard}, nil)
		_ = s.Serve()
		ents, _ := os.ReadDir(parent)
		if len(ents) != 1 || ents[0].Name() != "ws" {
			t.Fatalf("the sink wrote outside its workspace: %v", ents)
		}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".scp-") {
				t.Fatalf("temporary file %s left", p)
			}
			if fi, err := d.Info(); err == nil && fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0 {
				t.Fatalf("%s has mode %v", p, fi.Mode())
			}
			return nil
		})
	})
}

// TestMemoryWorkspace: the protocol works on the memory backend too (no
// directory, no exec), both ways.
func TestMemoryWorkspace(t *testing.T) {
	ws := fsops.NewMemory("/mem", fsops.Options{})
	defer ws.Close()
	p := serve(t, ws, "scp -r -p -t .")
	p.ok()
	p.send("D0755 0 d\n")
	p.ok()
	p.send("C0644 5 f.txt\n")
	p.ok()
	p.send("hello\x00")
	p.ok()
	p.send("E\n")
	p.ok()
	if code, err := p.end(); err != nil || code != 0 {
		t.Fatalf("upload: %v, exit %d", err, code)
	}
	if b, err := ws.ReadFile("d/f.txt"); err != nil || string(b) != "hello" {
		t.Fatalf("memory workspace holds %q, %v", b, err)
	}
	recs, warns, code := download(t, ws, "scp -r -f d")
	if want := []string{"D0755 0 d", "C0644 5 f.txt", "hello", "E"}; !reflect.DeepEqual(recs, want) || len(warns) != 0 || code != 0 {
		t.Fatalf("download: %q %q %d", recs, warns, code)
	}
}

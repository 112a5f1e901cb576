package scpd

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// Attack tests: what a client holding a valid token (maybe a read-only or
// scope-bound one) can make the scp server do with crafted records;
// docs/security.md's SFTP and SCP attack review lists them.

// outsideDir is a directory beside the workspace root (the tests' parent
// directory), with one file, for links that lead out.
func outsideDir(t *testing.T, root string) string {
	t.Helper()
	out := filepath.Join(filepath.Dir(root), "outside")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAttackSinkSizes: a C record of the largest size a line can carry is
// accepted and its bytes read as they come; a client that stops sending
// leaves the old file and no temporary one. Sizes past int64 and negative
// ones end the session before anything is created.
func TestAttackSinkSizes(t *testing.T) {
	for _, size := range []string{strconv.FormatInt(math.MaxInt64, 10), "9223372036854775808", "-1", "+1", "0x10", "1e9", " 1"} {
		t.Run(size, func(t *testing.T) {
			ws, root := workspace(t)
			os.WriteFile(filepath.Join(root, "a"), []byte("old"), 0o644)
			p := serve(t, ws, "scp -t a")
			p.ok()
			p.send("C0644 " + size + " a\n")
			if size == strconv.FormatInt(math.MaxInt64, 10) {
				p.ok()
				p.send(strings.Repeat("x", 1<<20))
				if _, err := p.end(); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.ErrClosedPipe) {
					t.Fatalf("Serve: %v", err)
				}
			} else {
				if s := p.status(); !strings.HasPrefix(s, "1:scp: protocol error") {
					t.Fatalf("status %q", s)
				}
				if code, err := p.end(); !errors.Is(err, errFatal) || code != 1 {
					t.Fatalf("Serve: %v, exit %d", err, code)
				}
			}
			if readFile(t, filepath.Join(root, "a")) != "old" {
				t.Fatal("the old file was replaced")
			}
			noStrays(t, root, "a")
		})
	}
}

// TestAttackSinkModes: setuid, setgid and sticky bits in C and D records,
// with -p or without, never reach the file system; "." as a file's name
// is the target directory, refused.
func TestAttackSinkModes(t *testing.T) {
	for _, preserve := range []string{"", "-p "} {
		ws, root := workspace(t)
		p := serve(t, ws, "scp -r "+preserve+"-t .")
		p.ok()
		p.send("D7777 0 d\n")
		p.ok()
		p.send("C7777 1 f\n")
		p.ok()
		p.send("f\x00")
		p.ok()
		p.send("C6755 1 .\n")
		if s := p.status(); s != "1:scp: d: Is a directory" {
			t.Fatalf("a file named '.': %q", s)
		}
		p.send("E\n")
		p.ok()
		p.end()
		for _, q := range []string{"d", "d/f"} {
			st, err := os.Stat(filepath.Join(root, q))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Fatalf("%s%s: mode %v", preserve, q, st.Mode())
			}
		}
	}
}

// TestAttackSinkTimes: T records far in the past or future are refused or
// set, never a crash; the largest accepted (2^40 seconds) is set as is.
func TestAttackSinkTimes(t *testing.T) {
	for rec, want := range map[string]string{
		"T1099511627776 0 1099511627776 0": "",
		"T1099511627777 0 0 0":             "out of range",
		"T0 999999 0 999999":               "",
		"T-1 0 0 0":                        "bad T record",
		"T9223372036854775808 0 0 0":       "bad T record",
		"T1 0 1 0 5":                       "bad T record",
		"T 0 1 0":                          "bad T record",
	} {
		t.Run(rec, func(t *testing.T) {
			ws, root := workspace(t)
			p := serve(t, ws, "scp -p -t .")
			p.ok()
			p.send(rec + "\n")
			s := p.status()
			if want != "" {
				if !strings.Contains(s, want) {
					t.Fatalf("status %q, want %q", s, want)
				}
				p.end()
				return
			}
			if s != "" {
				t.Fatalf("status %q", s)
			}
			p.send("C0644 1 f\n")
			p.ok()
			p.send("f\x00")
			// Set, or refused by the file system: either way the file is
			// written and the answer says which. A time past what the file
			// system stores is its to clamp (ext4 stores 2^40 s as -2^31).
			mtime, _ := strconv.ParseInt(strings.Fields(rec[1:])[0], 10, 64)
			switch s := p.status(); {
			case s == "":
				if st, _ := os.Stat(filepath.Join(root, "f")); st.ModTime().Unix() != mtime && mtime <= math.MaxUint32 {
					t.Fatalf("mtime %d, want %d", st.ModTime().Unix(), mtime)
				}
			case !strings.Contains(s, "f: set times"):
				t.Fatalf("status %q", s)
			}
			p.end()
			noStrays(t, root, "f")
		})
	}
}

// TestAttackSinkNeverEnds: a client that opens directories and never sends
// their E record, then goes away, ends the session; the files it finished
// stay, nothing half-written does.
func TestAttackSinkNeverEnds(t *testing.T) {
	ws, root := workspace(t)
	p := serve(t, ws, "scp -r -t .")
	p.ok()
	for i := 0; i < 10; i++ {
		p.send("D0755 0 d\n")
		p.ok()
	}
	p.send("C0644 1 f\n")
	p.ok()
	p.send("f\x00")
	p.ok()
	p.send("C0644 100 g\n")
	p.ok()
	p.send("partial")
	if _, err := p.end(); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Serve: %v", err)
	}
	deep := filepath.Join(root, strings.Repeat("d/", 10))
	noStrays(t, deep, "f")
}

// TestAttackSinkLinks: a target or an entry that is a link leading out
// (dangling or not) is refused before anything is created outside.
func TestAttackSinkLinks(t *testing.T) {
	ws, root := workspace(t)
	out := outsideDir(t, root)
	os.Symlink(filepath.Join(out, "new"), filepath.Join(root, "dangling"))
	os.Symlink(filepath.Join(out, "secret"), filepath.Join(root, "secretlink"))
	os.Symlink(out, filepath.Join(root, "outdir"))
	for _, tc := range []struct{ cmd, rec string }{
		{"scp -t .", "C0644 1 dangling\n"},
		{"scp -t .", "C0644 1 secretlink\n"},
		{"scp -t dangling", "C0644 1 x\n"},
		{"scp -t secretlink", "C0644 1 x\n"},
		{"scp -t outdir", "C0644 1 x\n"},
		{"scp -r -t .", "D0755 0 outdir\n"},
		{"scp -r -t .", "D0755 0 dangling\n"},
	} {
		p := serve(t, ws, tc.cmd)
		p.ok()
		p.send(tc.rec)
		if s := p.status(); !strings.Contains(s, "outside the workspace") {
			t.Errorf("%s, %q: status %q", tc.cmd, tc.rec, s)
		}
		p.end()
	}
	noStrays(t, out, "secret")
	if b, _ := os.ReadFile(filepath.Join(out, "secret")); string(b) != "secret" {
		t.Fatal("the outside file changed")
	}
}

// TestAttackSourceSpecialFiles: a FIFO in the workspace, links to
// /dev/zero, /dev/stdin and /proc, and a directory link leading out are
// refused with a warning, at once: nothing waits on a peer or reads
// without end.
func TestAttackSourceSpecialFiles(t *testing.T) {
	ws, root := workspace(t)
	outsideDir(t, root)
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("/dev/zero", filepath.Join(root, "zero"))
	os.Symlink("/dev/stdin", filepath.Join(root, "stdin"))
	os.Symlink("/proc/self/environ", filepath.Join(root, "environ"))
	os.Symlink("../outside", filepath.Join(root, "out"))
	os.Symlink("fifo", filepath.Join(root, "tofifo"))
	done := make(chan struct{})
	go func() {
		defer close(done)
		recs, warns, code := download(t, ws, "scp -r -f fifo tofifo zero stdin environ out out/secret")
		want := []string{
			"1:scp: fifo: not a regular file",
			"1:scp: tofifo: not a regular file",
			"1:scp: zero: path leads outside the workspace",
			"1:scp: stdin: path leads outside the workspace",
			"1:scp: environ: path leads outside the workspace",
			"1:scp: out: path leads outside the workspace",
			"1:scp: out/secret: path leads outside the workspace",
		}
		if len(recs) != 0 || code != 1 || strings.Join(warns, "\n") != strings.Join(want, "\n") {
			t.Errorf("records %q, warnings %q, exit %d; want the warnings %q", recs, warns, code, want)
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the download is stuck on a special file")
	}
}

// TestAttackReadOnlySink: a read-only token's workspace (fsops.ReadOnly)
// takes no upload, file or directory, and keeps no temporary file.
func TestAttackReadOnlySink(t *testing.T) {
	rw, root := workspace(t)
	os.WriteFile(filepath.Join(root, "a"), []byte("old"), 0o644)
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	ws := fsops.ReadOnly(rw)
	for _, tc := range []struct{ cmd, rec string }{
		{"scp -t a", "C0644 3 a\n"},
		{"scp -t .", "C0644 3 new\n"},
		{"scp -r -t .", "D0755 0 newdir\n"},
	} {
		p := serve(t, ws, tc.cmd)
		p.ok()
		p.send(tc.rec)
		if s := p.status(); !strings.Contains(s, "Permission denied") {
			t.Errorf("%s %q: status %q", tc.cmd, tc.rec, s)
		}
		p.end()
	}
	// An existing directory can be entered (nothing changes), but with -p
	// its times and mode are not set, and nothing is written in it.
	p := serve(t, ws, "scp -r -p -t .")
	p.ok()
	p.send("T1 0 1 0\n")
	p.ok()
	p.send("D0700 0 d\n")
	p.ok()
	p.send("C0644 1 f\n")
	if s := p.status(); !strings.Contains(s, "Permission denied") {
		t.Errorf("a file in an existing directory: %q", s)
	}
	p.send("E\n")
	p.ok()
	if s := p.status(); !strings.Contains(s, "set times: Permission denied") {
		t.Errorf("the directory's times: %q", s)
	}
	p.end()
	if readFile(t, filepath.Join(root, "a")) != "old" {
		t.Fatal("a changed")
	}
	noStrays(t, root, "a", "d")
	noStrays(t, filepath.Join(root, "d"))
	if st, _ := os.Stat(filepath.Join(root, "d")); st.Mode().Perm() != 0o755 || st.ModTime().Unix() == 1 {
		t.Fatalf("d changed: %v %v", st.Mode(), st.ModTime())
	}
}

// TestAttackScopedSink: a scope-bound token's workspace is its scope: an
// upload aimed at the neighbour's, by ".." or a planted link, is refused.
func TestAttackScopedSink(t *testing.T) {
	parent, root := workspace(t)
	os.MkdirAll(filepath.Join(root, "alice"), 0o755)
	os.MkdirAll(filepath.Join(root, "bob"), 0o755)
	os.Symlink("../bob", filepath.Join(root, "alice", "tobob"))
	ws, err := parent.Scope("alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"../bob", "tobob", "tobob/x", filepath.Join(root, "bob")} {
		p := serve(t, ws, "scp -r -t "+target)
		p.ok()
		p.send("C0644 1 x\n")
		s := p.status()
		if s == "" {
			p.send("x\x00")
			p.status()
		}
		p.end()
	}
	noStrays(t, filepath.Join(root, "bob"))
}

// TestAttackSourceClientNeverReads: a client that asks for a file and
// then reads nothing holds the session in its write; when the channel
// closes, the session ends and closes the file.
func TestAttackSourceClientNeverReads(t *testing.T) {
	ws, root := workspace(t)
	if err := os.WriteFile(filepath.Join(root, "big"), make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	p := serve(t, ws, "scp -f big")
	p.send("\x00")
	if line, err := p.r.ReadString('\n'); err != nil || line != "C0644 4194304 big\n" {
		t.Fatalf("record %q, %v", line, err)
	}
	p.send("\x00")
	// Nothing more is read: the session is stuck writing the data.
	if _, err := p.end(); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Serve: %v", err)
	}
}

// TestAttackSourceNewlineNames: a file or directory whose name holds a
// newline (made by a command in the workspace) would end its record early,
// and what follows in the name and the data would be read by the client
// as records of the server's choosing (more files, in the client's target
// directory). It is skipped with a warning, as OpenSSH's scp server does.
func TestAttackSourceNewlineNames(t *testing.T) {
	ws, root := workspace(t)
	evil := "x\nC0644 4 injected"
	if err := os.WriteFile(filepath.Join(root, evil), []byte("evil"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "d", "sub\nD0755 0 e"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "d", "ok"), []byte("ok"), 0o644)
	recs, warns, code := download(t, ws, "scp -r -f x* d")
	want := []string{"D0755 0 d", "C0644 2 ok", "ok", "E"}
	if strings.Join(recs, "|") != strings.Join(want, "|") || code != 1 || len(warns) != 2 {
		t.Fatalf("records %q, warnings %q, exit %d; want %q and two warnings", recs, warns, code, want)
	}
	for _, w := range warns {
		if !strings.Contains(w, "filename contains a newline") {
			t.Fatalf("warning %q", w)
		}
	}
}

// TestAttackGlobWork: a glob of many levels over directories that link
// to themselves stays within MaxGlobMatches at every level, yet made
// 10,000 lookups through links a level (about 12 s of CPU a command, and
// the channel's end did not stop it); the lookups of one glob are bounded
// (MaxGlobLookups), and a glob stops when its connection ends.
func TestAttackGlobWork(t *testing.T) {
	ws, root := workspace(t)
	for i := 0; i < MaxGlobMatches; i++ {
		d := filepath.Join(root, "d"+strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(".", filepath.Join(d, "s")); err != nil {
			t.Fatal(err)
		}
	}
	// Called directly: the session's client would time out under -race
	// (source() sends the error as the command's warning).
	if m, err := expandGlob(t.Context(), ws, "*/s/s/s/s/s/s/s/s/x"); err == nil || !strings.Contains(err.Error(), "more than 50000 file system lookups") {
		t.Fatalf("%d matches, %v; want the lookups' bound", len(m), err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := expandGlob(ctx, ws, "*/x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("a glob after its connection ended: %v", err)
	}
}

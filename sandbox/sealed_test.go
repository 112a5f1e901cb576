//go:build linux

package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// TestSealedProgram: a sealed copy runs in every mode with its arguments
// as given and an empty stdin, a script's interpreter reads the copy, the
// file it was read from can change without changing what runs, the copy
// cannot be written, and one over the limit is refused.
func TestSealedProgram(t *testing.T) {
	if b, _ := os.ReadFile("/proc/sys/vm/memfd_noexec"); strings.TrimSpace(string(b)) == "2" {
		t.Skip("vm.memfd_noexec is 2: this kernel runs no memfd")
	}
	script := "#!/bin/sh\necho \"sealed $# [$1] [$2]\"; cat; echo end\n"
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			e, ws := newExec(t, mode)
			path := filepath.Join(ws, "build.sh")
			if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			s, err := SealProgram(f, 1<<20)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sum := sha256.Sum256([]byte(script))
			if s.Digest() != "sha256:"+hex.EncodeToString(sum[:]) || s.Size() != int64(len(script)) {
				t.Errorf("digest %s size %d", s.Digest(), s.Size())
			}
			// The agent rewrites the file: the copy is what runs.
			if err := os.WriteFile(path, []byte("#!/bin/sh\necho rewritten\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			res := run(t, e, Request{Command: s.Command("a b", "'c'"), Stdin: s.Stdin()})
			if got := string(res.Stdout); got != "sealed 2 [a b] ['c']\nend\n" || res.ExitCode != 0 {
				t.Errorf("stdout %q stderr %q exit %d", got, res.Stderr, res.ExitCode)
			}
			// An ELF program runs from its copy too.
			bin, err := os.Open("/bin/echo")
			if err != nil {
				t.Skip(err)
			}
			elf, err := SealProgram(bin, 64<<20)
			bin.Close()
			if err != nil {
				t.Fatal(err)
			}
			defer elf.Close()
			if res := run(t, e, Request{Command: elf.Command("from", "memfd"), Stdin: elf.Stdin()}); string(res.Stdout) != "from memfd\n" {
				t.Errorf("elf: %q %q", res.Stdout, res.Stderr)
			}
		})
	}
	s, err := SealProgram(strings.NewReader("#!/bin/sh\n"), 1<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Stdin().WriteAt([]byte("X"), 0); err == nil {
		t.Error("the sealed copy was written")
	}
	var ce *errcode.Error
	if _, err := SealProgram(strings.NewReader(strings.Repeat("x", 11)), 10); !errors.As(err, &ce) || ce.Code != errcode.TooLarge {
		t.Errorf("over the limit: %v", err)
	}
}

package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// direntRecord is one struct linux_dirent64 of name and type, padded to 8
// bytes as the kernel writes it.
func direntRecord(name string, typ byte) []byte {
	n := (19 + len(name) + 1 + 7) &^ 7
	b := make([]byte, n)
	binary.NativeEndian.PutUint16(b[16:], uint16(n))
	b[18] = typ
	copy(b[19:], name)
	return b
}

// dirents reads what getdents writes, skips . and .., and refuses a record
// that does not fit; whatever it is given, it ends, and each name it
// hands out is one NUL-terminated name of the buffer.
func FuzzDirents(f *testing.F) {
	f.Add(bytes.Join([][]byte{direntRecord(".", 4), direntRecord("..", 4), direntRecord("a", 8), direntRecord("dir", 4)}, nil))
	f.Add(direntRecord("x", 8)[:20])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 1, 'a', 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		err := dirents(b, func(cname []byte, _ byte) error {
			if len(cname) < 2 || cname[len(cname)-1] != 0 || bytes.IndexByte(cname[:len(cname)-1], 0) >= 0 {
				t.Fatalf("a name %q that is not one NUL-terminated name", cname)
			}
			if n := string(cname[:len(cname)-1]); n == "." || n == ".." {
				t.Fatalf("%q handed out", n)
			}
			return nil
		})
		if err != nil && !errors.Is(err, errBadDirent) {
			t.Fatalf("dirents: %v", err)
		}
	})
}

func TestDirents(t *testing.T) {
	var got []string
	b := bytes.Join([][]byte{direntRecord(".", 4), direntRecord("..", 4), direntRecord("a", 8), direntRecord("dir", 4)}, nil)
	if err := dirents(b, func(cname []byte, typ byte) error {
		got = append(got, string(cname[:len(cname)-1])+"/"+string('0'+typ))
		return nil
	}); err != nil || len(got) != 2 || got[0] != "a/8" || got[1] != "dir/4" {
		t.Fatalf("dirents: %v, %v; want a (8) and dir (4)", got, err)
	}
	if err := dirents(b[:len(b)-1], func([]byte, byte) error { return nil }); !errors.Is(err, errBadDirent) {
		t.Fatalf("a record cut short: %v, want errBadDirent", err)
	}
	stop := errors.New("stop")
	if err := dirents(b, func([]byte, byte) error { return stop }); err != stop {
		t.Fatalf("fn's error: %v", err)
	}
}

package fsops

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// The workspace file tools' attack review (docs/security.md): what one call
// can make the daemon hold.

// TestEditResultBounded: an edit's result is bounded by the maximum read
// size before it is built. replaceAll of a one-byte oldText with a long
// newText (10^7 matches in a 10 MiB file times a 4 MiB newText is 40 TB),
// or a chain of edits that each double the text, would otherwise make the
// daemon allocate until it dies; the file is left as it was.
func TestEditResultBounded(t *testing.T) {
	const max = 1 << 20
	for _, im := range []impl{
		{"dir", func(t testing.TB) Workspace {
			ws, err := NewDir(t.TempDir(), Options{MaxReadSize: max})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ws.Close() })
			return ws
		}},
		{"memory", func(t testing.TB) Workspace {
			ws := NewMemory("/mem/ws", Options{MaxReadSize: max})
			t.Cleanup(func() { ws.Close() })
			return ws
		}},
	} {
		t.Run(im.name, func(t *testing.T) {
			ws := im.new(t)
			big := bytes.Repeat([]byte("a"), 600<<10)
			if err := ws.WriteFile("big.txt", big); err != nil {
				t.Fatal(err)
			}
			for _, dry := range []bool{false, true} {
				_, err := ws.Edit("big.txt", []Edit{{OldText: "a", NewText: "aa", ReplaceAll: true}}, dry)
				if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "edit 1 would make the file 1228800 bytes") {
					t.Fatalf("replaceAll doubling 600 KiB (dryRun %v): err = %v, want TOO_LARGE naming the size", dry, err)
				}
			}
			if got, err := ws.ReadFile("big.txt"); err != nil || !bytes.Equal(got, big) {
				t.Fatalf("file changed by a refused edit (err %v, %d bytes)", err, len(got))
			}

			if err := ws.WriteFile("small.txt", []byte("a\n")); err != nil {
				t.Fatal(err)
			}
			var chain []Edit
			for range 24 {
				chain = append(chain, Edit{OldText: "a", NewText: "aa", ReplaceAll: true})
			}
			_, err := ws.Edit("small.txt", chain, false)
			if !errcode.Is(err, errcode.TooLarge) || !strings.Contains(err.Error(), "edit 20 would make the file 1048577 bytes") {
				t.Fatalf("24 doubling edits: err = %v, want TOO_LARGE at edit 20 (2^20+1 bytes)", err)
			}
			if got, _ := ws.ReadFile("small.txt"); string(got) != "a\n" {
				t.Fatalf("file changed by a refused chain: %d bytes", len(got))
			}

			// Up to the bound an edit still applies.
			if _, err := ws.Edit("small.txt", chain[:19], false); err != nil {
				t.Fatalf("19 doubling edits (512 KiB): %v", err)
			}
		})
	}
}

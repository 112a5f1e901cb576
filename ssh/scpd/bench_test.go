package scpd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSCP moves one file through the protocol over an in-memory pipe,
// each way, into and out of a directory workspace: the cost of scpd itself
// (records, acknowledgements, the temporary file and rename of an upload).
func BenchmarkSCP(b *testing.B) {
	for _, size := range []int{4 << 10, 16 << 20} {
		data := make([]byte, size)
		b.Run(fmt.Sprintf("upload/%dKiB", size>>10), func(b *testing.B) {
			ws, _ := workspace(&testing.T{})
			defer ws.Close()
			b.SetBytes(int64(size))
			for b.Loop() {
				a, c := net.Pipe()
				cmd, _ := ParseCommand("scp -t f")
				done := make(chan error, 1)
				go func() { done <- NewSession(context.Background(), ws, cmd, c, nil).Serve(); c.Close() }()
				r := bufio.NewReader(a)
				expect := func() {
					if st, err := r.ReadByte(); err != nil || st != 0 {
						b.Fatalf("status %d %v", st, err)
					}
				}
				expect()
				fmt.Fprintf(a, "C0644 %d f\n", size)
				expect()
				a.Write(data)
				a.Write([]byte{0})
				expect()
				a.Close()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("download/%dKiB", size>>10), func(b *testing.B) {
			ws, root := workspace(&testing.T{})
			defer ws.Close()
			os.WriteFile(filepath.Join(root, "f"), data, 0o644)
			buf := make([]byte, 64<<10)
			b.SetBytes(int64(size))
			for b.Loop() {
				a, c := net.Pipe()
				cmd, _ := ParseCommand("scp -f f")
				done := make(chan error, 1)
				go func() { done <- NewSession(context.Background(), ws, cmd, c, nil).Serve(); c.Close() }()
				r := bufio.NewReader(a)
				a.Write([]byte{0})
				if _, err := r.ReadString('\n'); err != nil {
					b.Fatal(err)
				}
				a.Write([]byte{0})
				if _, err := io.CopyBuffer(io.Discard, io.LimitReader(r, int64(size)+1), buf); err != nil {
					b.Fatal(err)
				}
				a.Write([]byte{0})
				a.Close()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

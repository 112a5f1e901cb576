package mcphttp

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkStdioRead is one read_text_file over a stdio session (the path
// of `agent-backend daemon --local-only` and of MCP hosts that spawn the
// daemon), for a 4 KiB and a 1 MiB file. The client is a raw line writer
// and reader, so the figure is the server's: the SDK's stdio transport and
// what ServeStdio adds around it (stdio_drain.go). Run:
//
//	go test -run '^$' -bench StdioRead -benchmem ./face/mcphttp/
func BenchmarkStdioRead(b *testing.B) {
	for _, size := range []struct {
		name  string
		bytes int
	}{{"4KiB", 4 << 10}, {"1MiB", 1 << 20}} {
		b.Run(size.name, func(b *testing.B) {
			root := b.TempDir()
			// Lines of 1 KiB, and a limit over the 1,000 lines that
			// read_text_file shows by default, so that the whole file comes back.
			line := strings.Repeat("0123456789abcdef", 63) + "0123456789abcde\n"
			if err := os.WriteFile(filepath.Join(root, "bench.txt"), []byte(strings.Repeat(line, size.bytes/1024)), 0o644); err != nil {
				b.Fatal(err)
			}
			e := newEnvAt(b, root)
			p := newStdioPipes()
			done := make(chan error, 1)
			go func() {
				done <- e.srv.ServeStdio(context.Background(), p.serverIn, p.serverOut)
				p.serverOut.Close()
			}()
			out := bufio.NewReaderSize(p.clientIn, 64<<10)
			send := func(s string) {
				if _, err := io.WriteString(p.clientOut, s+"\n"); err != nil {
					b.Fatal(err)
				}
			}
			recv := func() []byte {
				var buf []byte
				for {
					chunk, err := out.ReadSlice('\n')
					buf = append(buf, chunk...)
					if err == nil {
						return buf
					}
					if err != bufio.ErrBufferFull {
						b.Fatal(err)
					}
				}
			}
			send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
			recv()
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"bench.txt","limit":2000}}}`
			send(call)
			if r := recv(); !bytes.Contains(r, []byte("0123456789abcdef")) || len(r) < size.bytes || bytes.Contains(r, []byte("Call again")) {
				b.Fatalf("reply of %d bytes: %.300s … %s", len(r), r, r[max(0, len(r)-400):])
			}
			b.SetBytes(int64(size.bytes))
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				send(call)
				recv()
			}
			b.StopTimer()
			p.clientOut.Close()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

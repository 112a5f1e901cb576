package mcphttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// chunkReader gives data in reads of the sizes sizes cycles through.
type chunkReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])%97 + 1
		c.i++
	}
	n = copy(p[:min(n, len(p))], c.data)
	c.data = c.data[n:]
	return n, nil
}

func (c *chunkReader) Close() error { return nil }

// FuzzDrainingReader: however stdin's bytes arrive, what the SDK reads,
// what the fast path is handed and what is refused are what taking the
// input one whole line at a time gives: each complete line longer than the
// line bound answered under the id its first maxLine bytes give
// (longLineKey; null where the ledger waits for that id) and nothing more,
// each blank line dropped, each other complete line judged by the ledger
// (refused past the cap, dropped when one request's id is in use), then
// offered to the fast path, then passed on with its newline; a last line
// without one passed on as it is, or answered as too long. The SDK is
// never handed more than one line in one read.
func FuzzDrainingReader(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`+"\n"+`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"+`[{"id":2,"method":"a"},{"id":3,"method":"b"}]`+"\nabc\n\nlast"), []byte{3, 40, 1}, uint8(2), uint8(0))
	f.Add([]byte(`{"method":"notifications/cancelled","params":{"requestId":1}}`+"\n"+`{"id":1,"method":"x"}`+"\n"), []byte{0}, uint8(1), uint8(0))
	f.Add([]byte("\n\n\nxyz\nxy"), []byte{}, uint8(0), uint8(0))
	f.Add([]byte(`{"id":7,"method":"tools/call","params":{"x":"`+strings.Repeat("y", 80)+`"}}`+"\n"+`{"id":8,"method":"ping"}`+"\n \t\r\n"+`{"id":9,"method":"m","p":"`+strings.Repeat("z", 70)), []byte{5, 60, 2}, uint8(3), uint8(40))
	f.Add([]byte(`{"id":1,"method":"a"}`+"\n"+`{"id":1,"method":"b","params":"`+strings.Repeat("q", 50)+"\"}\n[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21]\n"+`{"id":12345678,"method":"x"}`), []byte{1, 7}, uint8(3), uint8(14))
	f.Fuzz(func(t *testing.T, input, sizes []byte, limit, bound uint8) {
		maxLine := int(bound % 64) // 0: no bound
		// The fast path answers the lines whose length is a multiple of 3.
		answers := func(line []byte) bool { return len(line) > 0 && len(line)%3 == 0 }
		type result struct {
			out     []byte
			fast    []string
			refused []string
			long    []string
		}
		var got, want result
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing answers the requests: EOF does not wait for them
		r := &drainingReader{ReadCloser: &chunkReader{data: input, sizes: sizes}, ledger: newStdioLedger(int(limit % 4)), ctx: ctx,
			fast: func(line []byte) bool {
				if answers(line) {
					got.fast = append(got.fast, string(line))
					return true
				}
				return false
			},
			refuse:  func(ids []string, batch bool) { got.refused = append(got.refused, fmt.Sprint(ids, batch)) },
			maxLine: maxLine,
			tooLong: func(key string) { got.long = append(got.long, key) }}
		// The SDK's reads, of sizes of its own: never past a newline.
		p := make([]byte, 1+len(sizes)%50)
		for {
			n, err := r.Read(p)
			if i := bytes.IndexByte(p[:n], '\n'); i >= 0 && i < n-1 {
				t.Fatalf("a read handed the SDK %q, more than one line", p[:n])
			}
			got.out = append(got.out, p[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}

		ref := newStdioLedger(int(limit % 4))
		lines := bytes.SplitAfter(input, []byte("\n"))
		for _, l := range lines {
			whole := bytes.HasSuffix(l, []byte("\n"))
			body := bytes.TrimSuffix(l, []byte("\n"))
			if len(l) == 0 {
				continue
			}
			if maxLine > 0 && len(body) > maxLine {
				key := longLineKey(body[:maxLine])
				if key != "" && ref.waiting(key) {
					key = ""
				}
				want.long = append(want.long, key)
				continue
			}
			if len(bytes.Trim(body, " \t\r")) == 0 {
				continue
			}
			ids, batch, inUse := ref.read(body)
			switch {
			case ids != nil:
				want.refused = append(want.refused, fmt.Sprint(ids, batch))
			case inUse:
			case whole && len(body) <= stdioFastMaxLine && answers(body):
				want.fast = append(want.fast, string(body))
			default:
				want.out = append(want.out, l...)
			}
		}
		if !bytes.Equal(got.out, want.out) || !reflect.DeepEqual(got.fast, want.fast) || !reflect.DeepEqual(got.refused, want.refused) || !reflect.DeepEqual(got.long, want.long) {
			t.Fatalf("input %q in reads of %v, bound %d:\ngot  %q\nwant %q", input, sizes, maxLine, got, want)
		}
	})
}

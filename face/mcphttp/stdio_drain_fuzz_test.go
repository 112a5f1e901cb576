package mcphttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"reflect"
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
// input one whole line at a time gives: each complete line judged by the
// ledger (refused past the cap, dropped when one request's id is in use),
// then offered to the fast path, then passed on with its newline; a last
// line without one passed on as it is.
func FuzzDrainingReader(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`+"\n"+`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"+`[{"id":2,"method":"a"},{"id":3,"method":"b"}]`+"\nabc\n\nlast"), []byte{3, 40, 1}, uint8(2))
	f.Add([]byte(`{"method":"notifications/cancelled","params":{"requestId":1}}`+"\n"+`{"id":1,"method":"x"}`+"\n"), []byte{0}, uint8(1))
	f.Add([]byte("\n\n\nxyz\nxy"), []byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, input, sizes []byte, limit uint8) {
		// The fast path answers the lines whose length is a multiple of 3.
		answers := func(line []byte) bool { return len(line) > 0 && len(line)%3 == 0 }
		type result struct {
			out     []byte
			fast    []string
			refused []string
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
			refuse: func(ids []string, batch bool) { got.refused = append(got.refused, fmt.Sprint(ids, batch)) }}
		out, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		got.out = out

		ref := newStdioLedger(int(limit % 4))
		lines := bytes.SplitAfter(input, []byte("\n"))
		for _, l := range lines {
			whole := bytes.HasSuffix(l, []byte("\n"))
			body := bytes.TrimSuffix(l, []byte("\n"))
			if len(l) == 0 {
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
		if !bytes.Equal(got.out, want.out) || !reflect.DeepEqual(got.fast, want.fast) || !reflect.DeepEqual(got.refused, want.refused) {
			t.Fatalf("input %q in reads of %v:\ngot  %q\nwant %q", input, sizes, got, want)
		}
	})
}

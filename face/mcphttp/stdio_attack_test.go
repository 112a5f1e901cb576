package mcphttp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// initializeBatches starts a session on a protocol version that has
// batches (the SDK takes them up to 2025-03-26).
func (c *rawStdio) initializeBatches() {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	c.recv()
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// TestStdioLongLineHeldToCap: a line longer than the fast path holds
// (64 KiB) is judged against the session's in-flight cap like any other,
// with room below the cap too: a batch of 40 calls padded past 64 KiB, sent
// to a session with a cap of 2 and nothing waiting, is refused whole and
// none of its calls runs. Such a line used to be passed on as it arrived
// whenever the session had room, so one line could put any number of
// requests in flight past --max-inflight-per-ip.
func TestStdioLongLineHeldToCap(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxInflightPerIP = 2 })
	c := startRawStdio(t, e.srv)
	c.initializeBatches()
	const n = 40
	var calls []string
	for i := range n {
		calls = append(calls, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"f`+strconv.Itoa(i)+`.txt","content":"x"}}}`)
	}
	line := "[" + strings.Join(calls, ",") + strings.Repeat(" ", 4*stdioFastMaxLine) + "]"
	c.send(line)
	done := make(chan string, 1)
	go func() { done <- c.recv() }()
	var reply string
	select {
	case reply = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("no answer to the batch")
	}
	var msgs []struct {
		ID    int `json:"id"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(reply), &msgs); err != nil {
		t.Fatalf("%v in %.300q", err, reply)
	}
	refused := 0
	for _, m := range msgs {
		if m.Error != nil && m.Error.Code == -32000 {
			refused++
		}
	}
	if refused != n || len(msgs) != n {
		t.Errorf("%d answers, %d refused at the cap; want all %d refused (%.300q)", len(msgs), refused, n, reply)
	}
	for i := range n {
		if _, err := os.Stat(filepath.Join(e.root, "f"+strconv.Itoa(i)+".txt")); err == nil {
			t.Errorf("f%d.txt was written by a call past the cap", i)
		}
	}
}

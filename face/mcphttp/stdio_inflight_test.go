package mcphttp

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStdioInFlightCap: a stdio session is one client, held to
// --max-inflight-per-ip like a client address over HTTP. With two calls
// waiting for answers, a third call, a batch and a line too long for the
// fast path are each answered at once with -32000 naming the flag, and
// none of them runs; a notifications/cancelled is still read at the cap
// and makes room, and once the calls end the session takes calls again.
// Both ways a line can go (the fast path, the SDK) are held alike.
func TestStdioInFlightCap(t *testing.T) {
	for _, sdk := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast", true: "sdk"}[sdk], func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.MaxInflightPerIP = 2 })
			e.srv.noFastPath = sdk
			c := startRawStdio(t, e.srv)
			c.initialize()
			replies := make(chan string, 64)
			go func() {
				defer close(replies)
				for {
					line, err := c.out.ReadString('\n')
					if err != nil {
						return
					}
					replies <- line
				}
			}()
			next := func(what string) string {
				t.Helper()
				select {
				case line, ok := <-replies:
					if !ok {
						t.Fatalf("%s: stdout ended", what)
					}
					return line
				case <-time.After(20 * time.Second):
					t.Fatalf("%s: no answer", what)
				}
				return ""
			}
			busy := func(what, line string, ids ...int) {
				t.Helper()
				var msgs []struct {
					ID    int `json:"id"`
					Error struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				raw := strings.TrimSpace(line)
				if !strings.HasPrefix(raw, "[") {
					raw = "[" + raw + "]"
				}
				if err := json.Unmarshal([]byte(raw), &msgs); err != nil {
					t.Fatalf("%s: %v in %q", what, err, line)
				}
				var got []int
				for _, m := range msgs {
					got = append(got, m.ID)
					if m.Error.Code != -32000 || !strings.Contains(m.Error.Message, "--max-inflight-per-ip") || !strings.Contains(m.Error.Message, " 2 requests") {
						t.Errorf("%s: want -32000 naming the flag and the limit, got %q", what, line)
					}
				}
				if !slices.Equal(got, ids) {
					t.Errorf("%s: answered ids %v, want %v (%q)", what, got, ids, line)
				}
			}
			call := func(id int, tool, args string) string {
				return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
			}
			write := func(id int, name, content string) string {
				return call(id, "write_file", `{"path":"`+name+`","content":"`+content+`"}`)
			}
			wait := call(1, "exec", `{"command":"while [ ! -e release ]; do sleep 0.02; done; echo released"}`)
			c.send(wait)
			c.send(strings.Replace(wait, `"id":1`, `"id":2`, 1))

			c.send(write(3, "three.txt", "x"))
			busy("a third call", next("a third call"), 3)
			c.send(`[` + write(4, "four.txt", "x") + `,` + write(5, "five.txt", "x") + `]`)
			busy("a batch", next("a batch"), 4, 5)
			c.send(write(6, "six.txt", strings.Repeat("y", 2*stdioFastMaxLine)))
			busy("a line longer than the fast path holds", next("a long line"), 6)
			for _, name := range []string{"three.txt", "four.txt", "five.txt", "six.txt"} {
				if _, err := os.Stat(filepath.Join(e.root, name)); err == nil {
					t.Errorf("%s was written by a call refused at the cap", name)
				}
			}

			// Cancelling call 2 lets go of it: there is room for one.
			c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
			c.send(write(7, "seven.txt", "x"))
			for {
				line := next("call 7")
				if strings.Contains(line, `"id":7`) {
					if strings.Contains(line, `"error"`) || strings.Contains(line, `"isError":true`) {
						t.Fatalf("call 7 after a cancel: %s", line)
					}
					break
				}
			}
			if err := os.WriteFile(filepath.Join(e.root, "release"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			for {
				if strings.Contains(next("call 1"), `"id":1,`) {
					break
				}
			}
			c.send(write(8, "eight.txt", "x"))
			for {
				line := next("call 8")
				if strings.Contains(line, `"id":8`) {
					if strings.Contains(line, `"error"`) {
						t.Fatalf("call 8 once the calls ended: %s", line)
					}
					break
				}
			}
			for _, name := range []string{"seven.txt", "eight.txt"} {
				if _, err := os.Stat(filepath.Join(e.root, name)); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		})
	}
}

// TestStdioLedgerRefusesWhole: a line refused at the cap leaves the ledger
// as it was, its cancellations included, and answers only the ids it
// would have added; ids already waited for and lines that add nothing are
// never refused.
func TestStdioLedgerRefusesWhole(t *testing.T) {
	l := newStdioLedger(2)
	mustRead := func(line string, wantRefused ...string) {
		t.Helper()
		got, _, _ := l.read([]byte(line))
		if !slices.Equal(got, wantRefused) {
			t.Fatalf("read(%s): refused %q, want %q", line, got, wantRefused)
		}
	}
	pending := func(want ...string) {
		t.Helper()
		var got []string
		for k := range l.pending {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("pending %q, want %q", got, want)
		}
	}
	req := func(id string) string { return `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}` }
	cancel := func(id string) string {
		return `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `}}`
	}
	mustRead(req("1"))
	mustRead(req(`"a"`))
	pending("n1", "sa")
	mustRead(req("1")) // in use: the SDK drops it; nothing to refuse
	mustRead(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	mustRead(req("3"), "n3")
	// A batch that cancels one and adds two is refused whole: the cancel
	// is undone with it.
	mustRead(`[`+cancel("1")+`,`+req("4")+`,`+req("5")+`,`+req("4")+`]`, "n4", "n5")
	pending("n1", "sa")
	// One that cancels one and adds one fits.
	mustRead(`[` + cancel("1") + `,` + req("6") + `]`)
	pending("n6", "sa")
	if !l.full() {
		t.Error("full() false with 2 waited for and a limit of 2")
	}
	l.answered(json.RawMessage("6"))
	if l.full() {
		t.Error("full() true with 1 waited for")
	}
	mustRead(req("8"))
	pending("n8", "sa")

	// No cap.
	l = newStdioLedger(0)
	for i := range 100 {
		mustRead(req(strconv.Itoa(i)))
	}
	if l.full() {
		t.Error("full() with no cap")
	}
}

// TestStdioAnswerMakesRoomAsItIsWritten: an answer's id leaves the
// in-flight count as its write to stdout begins, so a client reading it
// (here: while the write is in progress) finds the room it made; the EOF
// wait, though, lasts until that write has ended.
func TestStdioAnswerMakesRoomAsItIsWritten(t *testing.T) {
	l := newStdioLedger(1)
	if refused, _, _ := l.read([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)); refused != nil {
		t.Fatalf("first request refused: %q", refused)
	}
	if !l.full() {
		t.Fatal("full() false with 1 waited for and a limit of 1")
	}
	eofWait := make(chan struct{})
	go func() {
		defer close(eofWait)
		l.waitAnswered(context.Background(), nil, nil)
	}()
	var during []string
	w := newCountingWriter(writerFunc(func(p []byte) (int, error) {
		// The client has the answer's bytes from here on.
		if l.full() {
			during = append(during, "the session is still full")
		}
		select {
		case <-eofWait:
			during = append(during, "the EOF wait ended before the answer was written")
		case <-time.After(50 * time.Millisecond):
		}
		return len(p), nil
	}), l)
	if _, err := w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	for _, d := range during {
		t.Error("while the answer was written: " + d)
	}
	select {
	case <-eofWait:
	case <-time.After(10 * time.Second):
		t.Fatal("the EOF wait did not end once the answer was written")
	}
	if refused, _, _ := l.read([]byte(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)); refused != nil {
		t.Fatalf("a request after the answer refused: %q", refused)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestStdioInFlightCapAtEOF: a last line without a newline is held to the
// cap too, and the session still ends once what it let through is
// answered.
func TestStdioInFlightCapAtEOF(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxInflightPerIP = 1 })
	c := serveRawStdio(t, context.Background(), e.srv)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"exec","arguments":{"command":"sleep 0.3; echo slow"}}}`)
	if _, err := c.p.clientOut.Write([]byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"two.txt","content":"x"}}}`)); err != nil {
		t.Fatal(err)
	}
	c.p.clientOut.Close()
	var lines []string
	for {
		line, err := c.out.ReadString('\n')
		if err != nil {
			break
		}
		lines = append(lines, line)
	}
	if err := <-c.done; err != nil {
		t.Errorf("ServeStdio: %v", err)
	}
	got := strings.Join(lines, "")
	if len(lines) != 2 || !strings.Contains(got, `"id":2,"error":{"code":-32000`) || !strings.Contains(got, "slow") {
		t.Errorf("want call 2 refused and call 1 answered, got:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(e.root, "two.txt")); err == nil {
		t.Error("the refused last line ran")
	}
}

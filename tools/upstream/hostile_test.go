package upstream

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostileScript is what the hostile test upstream (mode "hostile") does,
// read from .hostile.json in its working directory (the workspace), which
// the test writes before the server starts.
type hostileScript struct {
	// Tools is the tools/list result's "tools" array, raw.
	Tools json.RawMessage `json:"tools"`
	// NextCursor, when set, is sent with every tools/list page: the list
	// never ends.
	NextCursor string `json:"nextCursor,omitempty"`
	// InitDelayMS delays the answer to initialize (-1: never answer).
	InitDelayMS int `json:"initDelayMS,omitempty"`
	// Stderr is written to stderr at start, StderrRepeat times.
	Stderr       string `json:"stderr,omitempty"`
	StderrRepeat int    `json:"stderrRepeat,omitempty"`
}

// serveHostile is a raw line server driven by .hostile.json. Its tool
// "emit" writes the lines of its "lines" argument to stdout (a line
// "HEX:…" as the bytes the hex digits say; "$ID" in a line replaced by the
// call's id, "$PREV" by the id of the call before), then answers "emitted"
// unless "silent" is true; "repeat" writes them that many times
// ("noNewline": without the newlines); "stall"
// then stops reading stdin for good, without answering. Every other
// tools/call answers with its arguments as text. What it receives is
// recorded: requests (their method), notifications (method and the
// requestId they name) and answers to its own requests.
func serveHostile() int {
	var sc hostileScript
	if b, err := os.ReadFile(".hostile.json"); err == nil {
		_ = json.Unmarshal(b, &sc)
	}
	if sc.Tools == nil || string(sc.Tools) == "null" {
		sc.Tools = json.RawMessage(`[{"name":"emit","inputSchema":{"type":"object"}}]`)
	}
	for range max(sc.StderrRepeat, 1) {
		if sc.Stderr != "" {
			os.Stderr.WriteString(sc.Stderr)
		}
	}
	record("started pid=%d", os.Getpid())
	out := bufio.NewWriter(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), 64<<20)
	prev := "0"
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
			Params struct {
				ProtocolVersion string          `json:"protocolVersion"`
				Name            string          `json:"name"`
				Arguments       json.RawMessage `json:"arguments"`
				RequestID       json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil {
			continue
		}
		switch {
		case m.Method == "" && m.ID != nil:
			r := m.Result
			if r == nil {
				r = m.Error
			}
			record("answer %s %.200s", m.ID, r)
			continue
		case m.ID == nil:
			record("notification %s %s", m.Method, m.Params.RequestID)
			continue
		}
		record("request %s", m.Method)
		var result string
		switch m.Method {
		case "initialize":
			if sc.InitDelayMS < 0 {
				continue
			}
			time.Sleep(time.Duration(sc.InitDelayMS) * time.Millisecond)
			v, _ := json.Marshal(m.Params.ProtocolVersion)
			result = `{"protocolVersion":` + string(v) + `,"capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"hostile","version":"1"}}`
		case "tools/list":
			result = `{"tools":` + string(sc.Tools)
			if sc.NextCursor != "" {
				result += `,"nextCursor":"` + sc.NextCursor + `"`
			}
			result += `}`
		case "tools/call":
			var a struct {
				Lines  []string `json:"lines"`
				Repeat int      `json:"repeat"`
				Silent bool     `json:"silent"`
				Stall  bool     `json:"stall"`
				NoNL   bool     `json:"noNewline"`
			}
			_ = json.Unmarshal(m.Params.Arguments, &a)
			for range max(a.Repeat, 1) {
				for _, l := range a.Lines {
					if h, ok := strings.CutPrefix(l, "HEX:"); ok {
						b, _ := hex.DecodeString(h)
						l = string(b)
					}
					l = strings.ReplaceAll(l, "$ID", string(m.ID))
					l = strings.ReplaceAll(l, "$PREV", prev)
					out.WriteString(l)
					if !a.NoNL {
						out.WriteString("\n")
					}
				}
			}
			prev = string(m.ID)
			if a.Stall {
				// Stop reading stdin for good (the process runs on).
				out.Flush()
				record("stalled")
				select {}
			}
			if a.Silent {
				out.Flush()
				continue
			}
			text := "emitted"
			if a.Lines == nil {
				text = string(m.Params.Arguments)
			}
			v, _ := json.Marshal(text)
			result = `{"content":[{"type":"text","text":` + string(v) + `}]}`
		default:
			result = `{}`
		}
		out.WriteString(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + "}\n")
		out.Flush()
	}
	return 0
}

// writeScript writes the hostile upstream's script into the workspace.
func writeScript(t *testing.T, root string, sc hostileScript) {
	t.Helper()
	b, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".hostile.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

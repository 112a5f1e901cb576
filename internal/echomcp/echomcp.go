// Package echomcp is the cheapest MCP server on stdio that a client can
// initialize, list and call: one tool, echo, answering its "text" argument
// as text. It decodes each line with encoding/json and writes each answer
// with one write, so what it costs is close to nothing beside the round
// trip through its pipes. It is the benchmarks' upstream and the floor of
// the routed upstream call: `loadgen echo-mcp-stdio` (bench/loadgen) and
// BenchmarkRoutedUpstream (daemon) both serve it.
package echomcp

import (
	"bufio"
	"encoding/json"
	"io"
)

// Serve answers the JSON-RPC lines read from in on w until in ends: one
// line in, one line out, notifications unanswered, an unknown method
// answered with -32601.
func Serve(in io.Reader, w io.Writer) error {
	out := bufio.NewWriter(w)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Arguments       struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue // a notification, or an answer to nothing we asked
		}
		var answer string
		switch m.Method {
		case "initialize":
			v, _ := json.Marshal(m.Params.ProtocolVersion)
			answer = `"result":{"protocolVersion":` + string(v) + `,"capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1"}}`
		case "tools/list":
			answer = `"result":{"tools":[{"name":"echo","description":"echoes text","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}},"annotations":{"readOnlyHint":true}}]}`
		case "tools/call":
			v, _ := json.Marshal(m.Params.Arguments.Text)
			answer = `"result":{"content":[{"type":"text","text":` + string(v) + `}]}`
		case "ping":
			answer = `"result":{}`
		default:
			answer = `"error":{"code":-32601,"message":"method not found"}`
		}
		out.WriteString(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,` + answer + "}\n")
		if err := out.Flush(); err != nil {
			return err
		}
	}
	return sc.Err()
}

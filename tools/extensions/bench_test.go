package extensions

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/face/mcphttp"
	"github.com/agentbe/agentbe-daemon/tools/workspace"
)

const benchExt = `
def const(params):
    return "ok"

def loop(params):
    n = 0
    for i in range(params["n"]):
        n += i
    return n

def describe_extension():
    return Extension(name = "bench", tools = [
        Tool(name = "const", handler = const),
        Tool(name = "loop", handler = loop, parameters = [ToolParameter(name = "n", param_type = "integer", required = True)]),
    ])
`

// BenchmarkExtension: an extension tool returning a constant against the
// workspace's read_text_file of 4 KiB, both over MCP (HTTP, the fast path)
// in one run; a handler looping 10^5 times (ns/step = ns/op / 10^5); and the
// time from a file write to the new version answering. Run:
//
//	go test -run '^$' -bench Extension -benchtime 2000x ./extensions/
func BenchmarkExtension(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bench.star"), []byte(benchExt), 0o644); err != nil {
		b.Fatal(err)
	}
	f := startB(b, dir)
	if err := os.WriteFile(filepath.Join(f.ws.Root(), "4k.txt"), []byte(strings.Repeat("x", 4096)), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := f.reg.Set("workspace", workspace.Tools(f.ws, workspace.ExecEnv{})); err != nil {
		b.Fatal(err)
	}
	srv, err := mcphttp.New(mcphttp.Options{Workspace: f.ws, Registry: f.reg, RootDir: f.ws.Root()})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	call := func(b *testing.B, body string) {
		req, _ := http.NewRequest("POST", hs.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(out), `"isError":true`) {
			b.Fatalf("%d %s", resp.StatusCode, out)
		}
	}
	b.Run("mcp-extension-const", func(b *testing.B) {
		for b.Loop() {
			call(b, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"bench__const","arguments":{}}}`)
		}
	})
	b.Run("mcp-read_text_file-4k", func(b *testing.B) {
		for b.Loop() {
			call(b, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"4k.txt"}}}`)
		}
	})
	b.Run("loop-1e5-steps", func(b *testing.B) {
		for b.Loop() {
			if txt, isErr, _ := f.callB(b, "bench__loop", `{"n":100000}`); isErr || txt != "4999950000" {
				b.Fatal(txt)
			}
		}
	})
	b.Run("reload", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			src := strings.Replace(benchExt, `return "ok"`, `return "v`+string(rune('a'+i%26))+`"`, 1)
			want := "v" + string(rune('a'+i%26))
			if err := os.WriteFile(filepath.Join(dir, "bench.star"), []byte(src), 0o644); err != nil {
				b.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				if txt, _, _ := f.callB(b, "bench__const", `{}`); txt == want {
					break
				}
				if time.Now().After(deadline) {
					b.Fatal("no reload")
				}
				time.Sleep(time.Millisecond)
			}
		}
	})
}

// BenchmarkSQLiteQuery: a tool whose handler runs one small query (10 rows
// of a 1,000-row table, by a bound parameter) through the
// sqlite module, called through the registry: the file read through its
// descriptor, loaded into memory, queried and converted. Run:
//
//	go test -run '^$' -bench SQLiteQuery ./extensions/
func BenchmarkSQLiteQuery(b *testing.B) {
	dir := b.TempDir()
	src := "def q(p):\n    return sqlite.query('b.db', 'SELECT id, name FROM t WHERE id > ? ORDER BY id LIMIT 10', [p['from']])\n" +
		"def fill(p):\n    return sqlite.execute('b.db', \"CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT); " +
		"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 1000) INSERT INTO t SELECT x, 'name ' || x FROM c\")\n" +
		"def describe_extension():\n    return Extension(name = 'sq', tools = [Tool(name = 'q', handler = q), Tool(name = 'fill', handler = fill)])\n"
	if err := os.WriteFile(filepath.Join(dir, "sq.star"), []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	f := startB(b, dir)
	if txt, isErr, _ := f.callB(b, "sq__fill", `{}`); isErr {
		b.Fatal(txt)
	}
	for b.Loop() {
		if txt, isErr, _ := f.callB(b, "sq__q", `{"from":500}`); isErr || !strings.HasPrefix(txt, `[{"id":501,"name":"name 501"}`) {
			b.Fatal(txt)
		}
	}
}

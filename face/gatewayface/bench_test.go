package gatewayface_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/agentbe/agentbe-daemon/face/gatewayface"
	"github.com/agentbe/agentbe-daemon/face/mcphttp"
	"github.com/agentbe/agentbe-daemon/face/restface"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
	"github.com/agentbe/agentbe-daemon/tools/workspace"
)

// BenchmarkRead4K reads a 4 KiB file with the workspace tool read_text_file
// over loopback through each face of one registry: /mcp (mcphttp, its fast
// path), POST /execute (restface) and /gateway tools.invoke, in one run, on
// one server. Run:
//
//	go test -run '^$' -bench Read4K -benchmem -count 6 ./gatewayface/
func BenchmarkRead4K(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, "4k.txt"), bytes.Repeat([]byte("x"), 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	reg := registry.New(registry.Options{MaxConcurrent: 64})
	if err := reg.Set("workspace", workspace.Tools(ws, workspace.ExecEnv{})); err != nil {
		b.Fatal(err)
	}
	rules := admit.Rules{Guard: httpguard.New(httpguard.Options{AuthToken: token}), Token: httpguard.NewToken(token), RootDir: root, MaxBody: 1 << 20}
	ms, err := mcphttp.New(mcphttp.Options{Workspace: ws, Registry: reg, RootDir: root, AuthToken: token, Guard: rules.Guard})
	if err != nil {
		b.Fatal(err)
	}
	defer ms.Close()
	mux := http.NewServeMux()
	mux.Handle("/mcp", ms.Handler())
	restface.New(restface.Options{Registry: reg, Workspace: ws, Admit: rules}).Register(mux)
	mux.Handle("/gateway", gatewayface.New(gatewayface.Options{Registry: reg, Workspace: ws, Admit: rules, Rate: 1e9, Burst: 1 << 30}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	post := func(b *testing.B, url, body string, hdr map[string]string) {
		tr := &http.Transport{MaxIdleConnsPerHost: 4}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		do := func() []byte {
			req, _ := http.NewRequest("POST", url, strings.NewReader(body))
			for k, v := range hdr {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return out
		}
		if out := do(); !bytes.Contains(out, []byte("xxxxxxxx")) {
			b.Fatalf("%.300s", out)
		}
		b.ReportAllocs()
		for b.Loop() {
			do()
		}
	}
	auth := "Bearer " + token
	b.Run("mcp-fastpath", func(b *testing.B) {
		post(b, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":"4k.txt"}}}`,
			map[string]string{"Authorization": auth, "Content-Type": "application/json", "Accept": "application/json"})
	})
	b.Run("rest", func(b *testing.B) {
		post(b, srv.URL+"/execute", `{"tool_name":"read_text_file","arguments":{"path":"4k.txt"}}`,
			map[string]string{"Authorization": auth, "Content-Type": "application/json"})
	})
	b.Run("gateway", func(b *testing.B) {
		c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/gateway", authHdr())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools.invoke","params":{"toolId":"read_text_file","sessionId":"s","args":{"path":"4k.txt"}}}`)
		b.ReportAllocs()
		for b.Loop() {
			if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
				b.Fatal(err)
			}
			if _, out, err := c.ReadMessage(); err != nil || !bytes.Contains(out, []byte("xxxxxxxx")) {
				b.Fatalf("%.200s %v", out, err)
			}
		}
	})
}

package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
	"github.com/agentbe/agentbe-daemon/tools/workspace"
)

// BenchmarkGatewayTools: http.request to a loopback server (allowed for the
// benchmark) beside a plain net/http client doing the same request, and
// system.run of true beside the workspace tools' exec of true, all called
// through the registry in one run. Run:
//
//	go test -run '^$' -bench GatewayTools -benchtime 2000x ./tools/gateway/
func BenchmarkGatewayTools(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	net := netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}})
	defer net.CloseIdleConnections()
	root := b.TempDir()
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ws.Close()
	exe, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: ws.Root()})
	if err != nil {
		b.Fatal(err)
	}
	defer exe.Close()
	ap, _ := LoadApprovals("", ModeFull, AskOff, ws.Root(), 0)
	p := New(Options{Workspace: ws, Executor: exe, Net: net, Approvals: ap})
	reg := registry.New(registry.Options{})
	if err := reg.Set("gateway", p.Tools()); err != nil {
		b.Fatal(err)
	}
	if err := reg.Set("workspace", workspace.Tools(ws, workspace.ExecEnv{Executor: exe})); err != nil {
		b.Fatal(err)
	}
	call := func(b *testing.B, tool, args string) {
		res, err := reg.Call(context.Background(), tool, registry.Call{Args: json.RawMessage(args), Workspace: ws})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %v", tool, err, res)
		}
	}
	plain := &http.Client{Transport: &http.Transport{}}
	defer plain.CloseIdleConnections()
	b.Run("http.request", func(b *testing.B) {
		for b.Loop() {
			call(b, "http.request", `{"method":"GET","url":"`+srv.URL+`/"}`)
		}
	})
	b.Run("net-http-floor", func(b *testing.B) {
		for b.Loop() {
			resp, err := plain.Get(srv.URL + "/")
			if err != nil {
				b.Fatal(err)
			}
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
	})
	b.Run("system.run-true", func(b *testing.B) {
		for b.Loop() {
			call(b, "system.run", `{"argv":["true"]}`)
		}
	})
	b.Run("exec-true", func(b *testing.B) {
		for b.Loop() {
			call(b, "exec", `{"command":"true"}`)
		}
	})
}

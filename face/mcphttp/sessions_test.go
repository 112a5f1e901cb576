package mcphttp

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/tools/registry"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// sessionsEnv is newEnv with Options.Sessions on.
func sessionsEnv(t *testing.T, maxSessions int, idle time.Duration) *env {
	return newEnv(t, func(o *Options) {
		o.Sessions, o.MaxSessions, o.SessionIdleTimeout = true, maxSessions, idle
	})
}

// connectHTTP connects a go-sdk client over streamable HTTP (with its
// standalone GET stream) and reports tool list changes on changed.
func connectHTTP(t *testing.T, e *env, changed chan struct{}) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "sessions-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			if changed != nil {
				changed <- struct{}{}
			}
		},
	})
	return c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: e.url()}, nil)
}

// TestSessionsListChanged: with sessions on, a client gets
// notifications/tools/list_changed on its GET stream when a provider adds
// a tool, and then lists and calls it; every request went through the SDK.
func TestSessionsListChanged(t *testing.T) {
	e := sessionsEnv(t, 0, 0)
	changed := make(chan struct{}, 8)
	cs, err := connectHTTP(t, e, changed)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if cs.ID() == "" {
		t.Fatal("no Mcp-Session-Id: the endpoint is not stateful")
	}
	before := toolNames(t, cs)
	if err := e.srv.reg.Set("test", []registry.Tool{testTool("zz_ping", "pong", nil)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no notifications/tools/list_changed on the session's stream")
	}
	got := toolNames(t, cs)
	if !slices.Contains(got, "zz_ping") || len(got) != len(before)+1 {
		t.Errorf("tools after the change: %v", got)
	}
	if got := call(t, cs, "zz_ping", map[string]any{}); !strings.Contains(got, "pong") {
		t.Errorf("zz_ping: %q", got)
	}
	if n := e.srv.fastCalls.Load(); n != 0 {
		t.Errorf("the fast path answered %d requests with sessions on", n)
	}
}

// TestSessionsLifecycle: the session cap refuses an initialize past it with
// 503 naming the flag; DELETE ends a session, and its id (like an unknown
// one) then gets 404; an idle session expires.
func TestSessionsLifecycle(t *testing.T) {
	hdr := map[string]string{"Accept": "application/json, text/event-stream"}
	post := func(e *env, id string) (int, string) {
		h := map[string]string{"Accept": hdr["Accept"]}
		if id != "" {
			h["Mcp-Session-Id"] = id
		}
		resp, body := rawPost(t, e.url(), "POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, h)
		return resp.StatusCode, body
	}

	t.Run("cap", func(t *testing.T) {
		e := sessionsEnv(t, 2, 0)
		for range 2 {
			cs, err := connectHTTP(t, e, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
		}
		resp, body := rawPost(t, e.url(), "POST", initBody, hdr)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "--mcp-max-sessions") {
			t.Errorf("third session: %d %s; want 503 naming --mcp-max-sessions", resp.StatusCode, body)
		}
	})
	t.Run("delete_and_unknown", func(t *testing.T) {
		e := sessionsEnv(t, 0, 0)
		cs, err := connectHTTP(t, e, nil)
		if err != nil {
			t.Fatal(err)
		}
		id := cs.ID()
		if code, body := post(e, id); code != http.StatusOK {
			t.Fatalf("live session: %d %s", code, body)
		}
		cs.Close() // DELETE /mcp
		if code, _ := post(e, id); code != http.StatusNotFound {
			t.Errorf("ended session: %d, want 404", code)
		}
		if code, _ := post(e, "no-such-session"); code != http.StatusNotFound {
			t.Errorf("unknown session: %d, want 404", code)
		}
	})
	t.Run("idle", func(t *testing.T) {
		e := sessionsEnv(t, 0, 200*time.Millisecond)
		cs, err := connectHTTP(t, e, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		id := cs.ID()
		deadline := time.Now().Add(5 * time.Second)
		code := 0
		for time.Now().Before(deadline) {
			time.Sleep(300 * time.Millisecond)
			if code, _ = post(e, id); code == http.StatusNotFound {
				break
			}
		}
		if code != http.StatusNotFound {
			t.Errorf("idle session still answers (%d) after its idle timeout", code)
		}
	})
}

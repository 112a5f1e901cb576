package upstream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/sandbox/sandboxexec"
)

// The test binary is also the fault-injection upstream: run with
// AGENTBE_TEST_UPSTREAM set (through the server's env in its config, since
// the sandbox gives it nothing of ours) it serves MCP on stdio instead of
// running tests. It records what reaches it in .upstream-record in its
// working directory, so tests can check what it saw (or that it saw
// nothing).
func TestMain(m *testing.M) {
	sandboxexec.Main() // the landlock mode's trampoline: its commands run through this binary
	if mode := os.Getenv("AGENTBE_TEST_UPSTREAM"); mode != "" {
		os.Exit(serveTestUpstream(mode))
	}
	goleak.VerifyTestMain(m)
}

func record(format string, args ...any) {
	f, err := os.OpenFile(".upstream-record", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, format+"\n", args...)
	f.Close()
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func serveTestUpstream(mode string) int {
	switch mode {
	case "crash-at-start":
		fmt.Fprintln(os.Stderr, "fatal: cannot start (test upstream told to fail)")
		return 1
	case "stdin-closer":
		return serveStdinCloser()
	case "hostile":
		return serveHostile()
	case "hold-stdout":
		// A process left behind holding the server's stdout (crash-leaves-child).
		time.Sleep(time.Hour)
		return 0
	}
	record("started pid=%d", os.Getpid())
	srv := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, nil)
	type pathArgs struct {
		Path string `json:"path"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "read", Description: "reads a path"}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		record("read %s", a.Path)
		b, err := os.ReadFile(a.Path)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}, nil, nil
		}
		return text(string(b)), nil, nil
	})
	type echoArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "echoes", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, func(_ context.Context, _ *mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, any, error) {
		return text(a.Text), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "secret_tool", Description: "filtered out by tests"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return text("secret"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "crash", Description: "exits"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		if mode == "crash-leaves-child" {
			// A process of its own session (out of the server's process
			// group) left holding the server's stdout.
			self, _ := os.Executable()
			child := exec.Command(self)
			child.Env = append(os.Environ(), "AGENTBE_TEST_UPSTREAM=hold-stdout")
			child.Stdout = os.Stdout
			child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := child.Start(); err != nil {
				return nil, nil, err
			}
			record("left child pid=%d", child.Process.Pid)
		}
		fmt.Fprintln(os.Stderr, "panic: test upstream crashing on request")
		os.Exit(3)
		return nil, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "wedge", Description: "stops the process (SIGSTOP)"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		record("wedged")
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		return text("resumed"), nil, nil
	})
	type sleepArgs struct {
		MS int `json:"ms"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "sleep", Description: "sleeps, noticing cancellation"}, func(ctx context.Context, _ *mcp.CallToolRequest, a sleepArgs) (*mcp.CallToolResult, any, error) {
		select {
		case <-time.After(time.Duration(a.MS) * time.Millisecond):
			return text("slept"), nil, nil
		case <-ctx.Done():
			record("cancelled sleep")
			return nil, nil, ctx.Err()
		}
	})
	var calls atomic.Int64
	type keyArgs struct {
		Key string `json:"key"`
	}
	count := func(_ context.Context, _ *mcp.CallToolRequest, a keyArgs) (*mcp.CallToolResult, any, error) {
		return text(fmt.Sprintf("%s:%d", a.Key, calls.Add(1))), nil, nil
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "count", Description: "counts calls (read-only, idempotent: cacheable)",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}}, count)
	mcp.AddTool(srv, &mcp.Tool{Name: "count_live", Description: "counts calls (not idempotent)",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, count)
	type bigArgs struct {
		N int `json:"n"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "answers n bytes of text"}, func(_ context.Context, _ *mcp.CallToolRequest, a bigArgs) (*mcp.CallToolResult, any, error) {
		return text(strings.Repeat("x", a.N)), nil, nil
	})
	type floodArgs struct {
		Kind string `json:"kind"`
		N    int    `json:"n,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "flood", Description: "writes a raw line to stdout before answering"}, func(_ context.Context, _ *mcp.CallToolRequest, a floodArgs) (*mcp.CallToolResult, any, error) {
		pad := strings.Repeat("p", a.N)
		var line string
		switch a.Kind {
		case "notification":
			line = `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + pad + `"}}`
		case "request":
			line = `{"jsonrpc":"2.0","method":"roots/list","params":{"pad":"` + pad + `"},"id":"from-server"}`
		case "nameless":
			line = `{"jsonrpc":"2.0","result":{"pad":"` + pad + `"}}`
		case "close-stdout":
			// The answer never leaves: stdout closes and the process
			// runs on (its stdin still open, nothing more to write).
			record("flooded %s", a.Kind)
			os.Stdout.Close()
			select {}
		default: // "garbage"
			line = "this is not JSON-RPC"
		}
		os.Stdout.WriteString(line + "\n")
		record("flooded %s", a.Kind)
		return text("flooded"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "quit", Description: "exits 0 soon after answering"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		go func() { time.Sleep(50 * time.Millisecond); os.Exit(0) }()
		return text("bye"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "add_tool", Description: "adds a tool (list_changed)"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(srv, &mcp.Tool{Name: "added", Description: "added at run time"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return text("added works"), nil, nil
		})
		return text("added"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami", Description: "reports cwd, HOME and the env the server got"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		wd, _ := os.Getwd()
		return text(fmt.Sprintf("cwd=%s home=%s passed=%s secret=%s", wd, os.Getenv("HOME"), os.Getenv("PASSED"), os.Getenv("NOT_PASSED"))), nil, nil
	})
	if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test upstream:", err)
		return 2
	}
	return 0
}

// serveStdinCloser is a raw line server (the SDK's server would end with
// its stdin) with two tools: echo, and close_stdin, which answers, closes
// its stdin and runs on without reading or writing anything more.
func serveStdinCloser() int {
	record("started pid=%d", os.Getpid())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
				Arguments       struct {
					Text string `json:"text"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		var result string
		switch m.Method {
		case "initialize":
			v, _ := json.Marshal(m.Params.ProtocolVersion)
			result = `{"protocolVersion":` + string(v) + `,"capabilities":{"tools":{}},"serverInfo":{"name":"stdin-closer","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"close_stdin","inputSchema":{"type":"object"}},{"name":"stop_reading","inputSchema":{"type":"object"}}]}`
		case "tools/call":
			text := m.Params.Arguments.Text
			switch m.Params.Name {
			case "close_stdin":
				text = "closing"
			case "stop_reading":
				text = "stopping"
			}
			v, _ := json.Marshal(text)
			result = `{"content":[{"type":"text","text":` + string(v) + `}]}`
		default:
			result = `{}`
		}
		os.Stdout.WriteString(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + "}\n")
		if m.Params.Name == "close_stdin" {
			os.Stdin.Close()
			record("closed stdin")
			select {}
		}
		if m.Params.Name == "stop_reading" {
			// Stdin stays open and unread: a write to it fills the pipe
			// and blocks.
			record("stopped reading")
			select {}
		}
	}
	return 0
}

// testBinary is this test binary, which the upstream configs run.
func testBinary(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err = filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

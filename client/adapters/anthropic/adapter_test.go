package anthropic

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/agentbe/agentbe-daemon/client"
)

func TestToolset(t *testing.T) {
	ctx := context.Background()
	m, err := client.NewMemory(client.MemoryOptions{RootPrefix: "/ws", Data: map[string][]byte{"hello.txt": []byte("hi there")}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Destroy()
	tools, err := New(ctx, m, client.MCPOptions{InProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tools.Names(), "read_text_file") || !slices.Contains(tools.Names(), "write_file") {
		t.Fatalf("tools %v", tools.Names())
	}
	// The definitions, as the Messages API receives them.
	raw, err := json.Marshal(tools.Params())
	if err != nil {
		t.Fatal(err)
	}
	var defs []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		InputSchema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		} `json:"input_schema"`
	}
	if err := json.Unmarshal(raw, &defs); err != nil {
		t.Fatal(err)
	}
	var read *struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		InputSchema struct {
			Type       string         `json:"type"`
			Properties map[string]any `json:"properties"`
			Required   []string       `json:"required"`
		} `json:"input_schema"`
	}
	for i := range defs {
		if defs[i].Name == "read_text_file" {
			read = &defs[i]
		}
	}
	if read == nil || read.InputSchema.Type != "object" || read.InputSchema.Properties["path"] == nil ||
		!slices.Contains(read.InputSchema.Required, "path") || read.Description == "" {
		t.Fatalf("read_text_file's definition: %s", raw)
	}

	// A tool_use block from the model, and the result for the next turn.
	result := func(name, input string) (string, bool) {
		block := tools.Run(ctx, sdk.ToolUseBlock{ID: "toolu_1", Name: name, Input: json.RawMessage(input)})
		b, _ := json.Marshal(block)
		var r struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
			IsError   bool   `json:"is_error"`
			Content   []struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		json.Unmarshal(b, &r)
		if r.Type != "tool_result" || r.ToolUseID != "toolu_1" || len(r.Content) != 1 {
			t.Fatalf("not a tool_result for toolu_1: %s", b)
		}
		return r.Content[0].Text, r.IsError
	}
	if text, isErr := result("read_text_file", `{"path":"hello.txt"}`); isErr || text != "hi there" {
		t.Errorf("read: %q %v", text, isErr)
	}
	if text, isErr := result("write_file", `{"path":"new.txt","content":"from the model"}`); isErr {
		t.Errorf("write: %q", text)
	}
	if got, _ := m.Read(ctx, "new.txt"); string(got) != "from the model" {
		t.Errorf("the write did not reach the backend: %q", got)
	}
	if text, isErr := result("read_text_file", `{"path":"../escape"}`); !isErr || !strings.Contains(text, "escape") {
		t.Errorf("an escape: %q %v", text, isErr)
	}
	if _, isErr := result("no_such_tool", `{}`); !isErr {
		t.Error("an unknown tool is not an error result")
	}
	if _, isErr := result("read_text_file", `not json`); !isErr {
		t.Error("bad input is not an error result")
	}
	// Destroying the backend closes the session the toolset uses.
	m.Destroy()
	if _, isErr := result("read_text_file", `{"path":"hello.txt"}`); !isErr {
		t.Error("the toolset still works after the backend's destroy")
	}
}

// Package anthropic exposes an agentbe backend's MCP tools to the Anthropic
// Go SDK (github.com/anthropics/anthropic-sdk-go): the tool definitions a
// Messages request takes, and the tool_result block for each tool_use block
// the model returns ("Adapters" of the Agent Backend specification). It is
// a module of its own so that the daemon does not depend on the SDK.
//
//	tools, err := anthropic.New(ctx, backend, client.MCPOptions{})
//	msg, err := sdk.Messages.New(ctx, sdkanthropic.MessageNewParams{..., Tools: tools.Params()})
//	for _, block := range msg.Content {
//		if use, ok := block.AsAny().(sdkanthropic.ToolUseBlock); ok {
//			results = append(results, tools.Run(ctx, use))
//		}
//	}
package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/client"
)

// Toolset is a backend's tools for one agent: an MCP client session made
// through the backend (so the backend's Destroy closes it) and the tools it
// listed.
type Toolset struct {
	cs    *mcp.ClientSession
	tools []*mcp.Tool
}

// New connects to the backend's MCP server (opts as for Backend.MCPClient)
// and lists its tools.
func New(ctx context.Context, b client.Backend, opts client.MCPOptions) (*Toolset, error) {
	cs, err := b.MCPClient(ctx, opts)
	if err != nil {
		return nil, err
	}
	t := &Toolset{cs: cs}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("listing the backend's tools: %w", err)
		}
		t.tools = append(t.tools, tool)
	}
	return t, nil
}

// Names lists the tools, in the order the server listed them.
func (t *Toolset) Names() []string {
	names := make([]string, len(t.tools))
	for i, tool := range t.tools {
		names[i] = tool.Name
	}
	return names
}

// Params are the tool definitions for MessageNewParams.Tools: each tool's
// name, description and input schema as the server declared them.
func (t *Toolset) Params() []sdk.ToolUnionParam {
	out := make([]sdk.ToolUnionParam, 0, len(t.tools))
	for _, tool := range t.tools {
		var schema struct {
			Properties any      `json:"properties"`
			Required   []string `json:"required"`
		}
		if raw, err := json.Marshal(tool.InputSchema); err == nil {
			_ = json.Unmarshal(raw, &schema)
		}
		p := sdk.ToolParam{
			Name:        tool.Name,
			InputSchema: sdk.ToolInputSchemaParam{Properties: schema.Properties, Required: schema.Required},
		}
		if tool.Description != "" {
			p.Description = sdk.String(tool.Description)
		}
		out = append(out, sdk.ToolUnionParam{OfTool: &p})
	}
	return out
}

// Run calls the tool a tool_use block names with its input and returns the
// tool_result block for the next user message: the tool's text, or an
// error result (the model sees it and can recover) when the tool failed,
// is unknown, or the call could not be made.
func (t *Toolset) Run(ctx context.Context, use sdk.ToolUseBlock) sdk.ContentBlockParamUnion {
	var args map[string]any
	if len(use.Input) > 0 {
		if err := json.Unmarshal(use.Input, &args); err != nil {
			return sdk.NewToolResultBlock(use.ID, "invalid tool input: "+err.Error(), true)
		}
	}
	res, err := t.cs.CallTool(ctx, &mcp.CallToolParams{Name: use.Name, Arguments: args})
	if err != nil {
		return sdk.NewToolResultBlock(use.ID, "tool call failed: "+err.Error(), true)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	return sdk.NewToolResultBlock(use.ID, text.String(), res.IsError)
}

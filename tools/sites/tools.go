package sites

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Instructions is what an MCP client is told about the site's tools: the
// rules a site's AGENTS.md gives an agent, restated for MCP.
const Instructions = "This server also serves a tool site: Markdown pages whose frontmatter lists the commands an agent may run. " +
	"Start with read_page(\"README.md\"); follow the links between pages. Each page's `tools` frontmatter lists argv patterns: " +
	"a string must match exactly, {} is one argument of any value, {regex: ...} one argument matching the regex, and a final \";\" " +
	"forbids extra arguments. Run one with run_command(path, command) where path is the page that lists it; the command runs in " +
	"that page's directory, without a shell (no pipes, globs or $VARs of yours), and arguments may not be absolute paths or contain \"..\". " +
	"Send $VAR literally where a page's pattern has one: the server fills it in."

type readPageArgs struct {
	Path string `json:"path"`
}

type runCommandArgs struct {
	Path    string            `json:"path"`
	Command []string          `json:"command"`
	Args    map[string]string `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Tools are the site's MCP tools: read_page and run_command, with the
// answers of GET and POST.
func (s *Site) Tools() []registry.Tool {
	ro := true
	return []registry.Tool{
		{
			Name:        "read_page",
			Title:       "Read a tool site page",
			Description: "Read a page of the tool site (Markdown, or any file). path is the page's path in the site: \"README.md\" (the front page), \"data\" (data/README.md), \"guide\" (guide.md).",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{
				"path": map[string]any{"type": "string", "description": "the page's path in the site; README.md when empty"},
			}, "additionalProperties": false},
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ro, IdempotentHint: true, OpenWorldHint: &ro},
			Handler: func(ctx context.Context, call registry.Call) *mcp.CallToolResult {
				var a readPageArgs
				if err := decode(call.Args, &a); err != nil {
					return siteError(err)
				}
				if call.NoExec || call.ReadOnly {
					ctx = WithoutCommands(ctx)
				}
				_, data, err := s.ReadPage(ctx, a.Path)
				if err != nil {
					return siteError(err)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}}
			},
		},
		{
			Name:         "run_command",
			RunsCommands: true,
			Title:        "Run a tool site command",
			Description:  "Run a command that a page of the tool site allows in its frontmatter, in that page's directory, without a shell. Returns {stdout, stderr, returncode}.",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{
				"path":    map[string]any{"type": "string", "description": "the page whose frontmatter lists the command"},
				"command": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1, "description": "argv, e.g. [\"wc\", \"-l\", \"cities.csv\"]"},
				"args":    map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}, "description": "values for {key} placeholders in command"},
				"env":     map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}, "description": "extra environment variables (bounded; PATH, HOME, LD_* and the like are refused)"},
			}, "required": []string{"path", "command"}, "additionalProperties": false},
			Handler: func(ctx context.Context, call registry.Call) *mcp.CallToolResult {
				var a runCommandArgs
				if err := decode(call.Args, &a); err != nil {
					return siteError(err)
				}
				res, err := s.Run(ctx, a.Path, ActionRequest{Command: a.Command, Args: a.Args, Env: a.Env})
				var te *TimeoutError
				if errors.As(err, &te) {
					res = te.Response
					res.Stderr += te.Error() + "\n"
					out, _ := json.Marshal(res)
					return registry.WithCode(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}}, errcode.Timeout)
				}
				if err != nil {
					return siteError(err)
				}
				out, _ := json.Marshal(res)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}}
			},
		},
	}
}

func decode(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fail(400, "invalid arguments: %v", err)
	}
	return nil
}

// siteError is a refusal as a tool result, with its errcode: the one the
// refusal names, else the one of its status.
func siteError(err error) *mcp.CallToolResult {
	code := errcode.InvalidArgument
	var e *Error
	if errors.As(err, &e) {
		switch {
		case e.code != "":
			code = e.code
		case e.Status == 403:
			code = errcode.PathEscapeAttempt
		case e.Status == 404:
			code = errcode.NotFound
		case e.Status == 413:
			code = errcode.TooLarge
		case e.Status == 500, e.Status == 502:
			code = errcode.ExecError
		}
	}
	return registry.WithCode(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(err)}}}, code)
}

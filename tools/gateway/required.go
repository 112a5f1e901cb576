package gateway

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// requireFields makes t refuse a call whose arguments lack a field its
// schema lists as required (or give it as null) with INVALID_ARGUMENT
// naming the fields, before its handler runs: fs.read {} is a bad request
// (400 on /execute), not a read of the workspace's root. Arguments that
// are not an object are left to the handler's decoding, which words that.
func requireFields(t registry.Tool) registry.Tool {
	s, _ := t.InputSchema.(map[string]any)
	required, _ := s["required"].([]string)
	if len(required) == 0 {
		return t
	}
	next, name := t.Handler, t.Name
	t.Handler = func(ctx context.Context, call registry.Call) *mcp.CallToolResult {
		if missing := missingFields(call.Args, required); len(missing) > 0 {
			return failf(errcode.InvalidArgument, name, "missing required %s %s (required: %s)",
				plural(len(missing), "argument", "arguments"), strings.Join(missing, ", "), strings.Join(required, ", "))
		}
		return next(ctx, call)
	}
	return t
}

// missingFields is the required fields args lacks or gives as null.
func missingFields(args json.RawMessage, required []string) []string {
	var obj map[string]json.RawMessage
	if len(args) == 0 || string(args) == "null" {
		obj = nil
	} else if err := json.Unmarshal(args, &obj); err != nil {
		return nil // not an object: the handler's decode says so
	}
	var missing []string
	for _, f := range required {
		if v, ok := obj[f]; !ok || string(v) == "null" {
			missing = append(missing, f)
		}
	}
	return missing
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

package mcphttp

import (
	"context"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK validates tool arguments against the input schema before our
// handlers run and reports a failure as an isError result worded for Go
// programmers ("validating \"arguments\": validating root: validating
// /properties/offset: exclusiveMinimum: 0/1 is less than or equal to
// 0.000000"). An LLM reads that text to fix its next call, so a receiving
// middleware rewrites it in the reference's frame ("Input validation error:
// Invalid arguments for tool read_text_file: ...") with a plain sentence
// naming the argument and what it must be.

const sdkValidationPrefix = `validating "arguments": `

var (
	reProp     = regexp.MustCompile(`validating /properties/([^:]+): (.*)$`)
	reRequired = regexp.MustCompile(`required: missing properties: \[(.*)\]`)
	reType     = regexp.MustCompile(`^type: (.*) has type "([^"]+)", want "([^"]+)"$`)
	reExclMin  = regexp.MustCompile(`^exclusiveMinimum: (\S+?)(?:/1)? is less than or equal to (\S+)$`)
	reMin      = regexp.MustCompile(`^minimum: (\S+?)(?:/1)? is less than (\S+)$`)
	reMinItems = regexp.MustCompile(`^minItems: array length (\d+) is less than (\d+)$`)
	reEnum     = regexp.MustCompile(`^enum: (.*) does not equal any of: \[(.*)\]$`)
)

func (s *Server) validationMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if method != "tools/call" || err != nil {
			return res, err
		}
		ctr, ok := res.(*mcp.CallToolResult)
		if !ok || !ctr.IsError || len(ctr.Content) != 1 {
			return res, err
		}
		tc, ok := ctr.Content[0].(*mcp.TextContent)
		if !ok || !strings.HasPrefix(tc.Text, sdkValidationPrefix) {
			return res, err
		}
		name := ""
		if r, ok := req.(*mcp.CallToolRequest); ok && r.Params != nil {
			name = r.Params.Name
		}
		tc.Text = "Input validation error: Invalid arguments for tool " + name + ": " +
			explainValidation(strings.TrimPrefix(tc.Text, sdkValidationPrefix))
		return res, err
	}
}

// explainValidation turns one jsonschema-go message into a sentence.
func explainValidation(msg string) string {
	if m := reRequired.FindStringSubmatch(msg); m != nil {
		return "missing required argument " + strings.ReplaceAll(m[1], `","`, `", "`)
	}
	m := reProp.FindStringSubmatch(msg)
	if m == nil {
		return strings.TrimPrefix(msg, "validating root: ")
	}
	prop, detail := m[1], m[2]
	// Nested properties ("edits/0/properties/oldText") read as a path.
	prop = strings.ReplaceAll(prop, "/properties/", ".")
	if sub := reProp.FindStringSubmatch(detail); sub != nil {
		prop, detail = prop+"."+strings.ReplaceAll(sub[1], "/properties/", "."), sub[2]
	}
	switch {
	case reType.MatchString(detail):
		t := reType.FindStringSubmatch(detail)
		return prop + " must be of type " + t[3] + ", got " + t[2] + " " + t[1]
	case reExclMin.MatchString(detail):
		t := reExclMin.FindStringSubmatch(detail)
		return prop + " must be greater than " + trimZeros(t[2]) + ", got " + t[1]
	case reMin.MatchString(detail):
		t := reMin.FindStringSubmatch(detail)
		return prop + " must be at least " + trimZeros(t[2]) + ", got " + t[1]
	case reMinItems.MatchString(detail):
		t := reMinItems.FindStringSubmatch(detail)
		return prop + " must have at least " + t[2] + " item(s), got " + t[1]
	case reEnum.MatchString(detail):
		t := reEnum.FindStringSubmatch(detail)
		return prop + " must be one of " + strings.Join(strings.Fields(t[2]), ", ") + ", got " + t[1]
	}
	return prop + ": " + detail
}

func trimZeros(f string) string {
	if strings.Contains(f, ".") {
		f = strings.TrimRight(strings.TrimRight(f, "0"), ".")
	}
	return f
}

package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

type requestArgs struct {
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers,omitempty"`
	Query     map[string]string `json:"query,omitempty"`
	Body      *string           `json:"body,omitempty"`
	TimeoutMs int               `json:"timeoutMs,omitempty"`
}

// requestResult is http.request's answer. A body that is not UTF-8 text is
// base64 with bodyEncoding "base64"; truncated says the body was cut at the
// cap.
type requestResult struct {
	Status       int               `json:"status"`
	Headers      map[string]string `json:"headers"`
	Body         string            `json:"body"`
	BodyEncoding string            `json:"bodyEncoding"`
	Truncated    bool              `json:"truncated"`
	URL          string            `json:"url"`
}

type downloadArgs struct {
	URL      string `json:"url"`
	DestPath string `json:"destPath"`
}

func (p *Provider) httpTools() []registry.Tool {
	openWorld := true
	return []registry.Tool{
		{
			Name:        "http.request",
			Description: "Make an HTTP request to a public address (http or https; loopback, private, link-local and cloud metadata addresses are refused). Returns {status, headers, body, bodyEncoding, truncated, url}; a body that is not text is base64.",
			InputSchema: schema(map[string]any{
				"method":    map[string]any{"type": "string", "enum": []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}, "default": "GET"},
				"url":       map[string]any{"type": "string"},
				"headers":   map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
				"query":     map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
				"body":      map[string]any{"type": "string"},
				"timeoutMs": map[string]any{"type": "integer", "minimum": 1},
			}, "url"),
			Annotations: &mcp.ToolAnnotations{OpenWorldHint: &openWorld},
			Handler:     p.request,
		},
		{
			Name:        "http.download",
			Description: "Download a public URL into a file of the workspace, atomically (the file appears whole or not at all). Returns {success, path, bytes}.",
			InputSchema: schema(map[string]any{
				"url":      map[string]any{"type": "string"},
				"destPath": map[string]any{"type": "string", "description": "a path in the workspace"},
			}, "url", "destPath"),
			Annotations: &mcp.ToolAnnotations{OpenWorldHint: &openWorld},
			Handler:     p.download,
		},
	}
}

func (p *Provider) request(ctx context.Context, call registry.Call) *mcp.CallToolResult {
	var a requestArgs
	if err := decode(call.Args, &a); err != nil {
		return fail(err)
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		return failf(errcode.InvalidArgument, "http.request", "url %q: %v", a.URL, err)
	}
	if len(a.Query) > 0 {
		q := u.Query()
		for k, v := range a.Query {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	if a.TimeoutMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(a.TimeoutMs)*time.Millisecond)
		defer cancel()
	}
	var body io.Reader = http.NoBody
	if a.Body != nil {
		body = strings.NewReader(*a.Body)
	}
	req, err := http.NewRequestWithContext(ctx, strings.ToUpper(a.Method), u.String(), body)
	if err != nil {
		return failf(errcode.InvalidArgument, "http.request", "%v", err)
	}
	for k, v := range a.Headers {
		req.Header.Set(k, v)
	}
	res, err := p.opts.Net.Fetch(ctx, req)
	if err != nil {
		return netFailure("http.request", err)
	}
	out := requestResult{Status: res.Status, Headers: map[string]string{}, Truncated: res.Truncated, URL: res.URL, BodyEncoding: "text", Body: string(res.Body)}
	for k := range res.Header {
		out.Headers[strings.ToLower(k)] = res.Header.Get(k)
	}
	if !utf8.Valid(res.Body) {
		out.Body, out.BodyEncoding = base64.StdEncoding.EncodeToString(res.Body), "base64"
	}
	return ok(out)
}

// netFailure: a refusal is INVALID_ARGUMENT (a 400 on /execute), anything
// else a failed request.
func netFailure(op string, err error) *mcp.CallToolResult {
	var be *netguard.BlockedError
	if errors.As(err, &be) {
		return failf(errcode.InvalidArgument, op, "%v", be)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return failf(errcode.Timeout, op, "%v", err)
	}
	return failf(errcode.ExecError, op, "%v", err)
}

func (p *Provider) download(ctx context.Context, call registry.Call) *mcp.CallToolResult {
	var a downloadArgs
	if err := decode(call.Args, &a); err != nil {
		return fail(err)
	}
	ws := p.workspace(call)
	if _, err := ws.Resolve(a.DestPath); err != nil {
		return fail(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL, http.NoBody)
	if err != nil {
		return failf(errcode.InvalidArgument, "http.download", "url %q: %v", a.URL, err)
	}
	res, err := p.opts.Net.Fetch(ctx, req)
	if err != nil {
		return netFailure("http.download", err)
	}
	if res.Status < 200 || res.Status > 299 {
		return failf(errcode.ExecError, "http.download", "%s answered %d; nothing was written", a.URL, res.Status)
	}
	if res.Truncated {
		return failf(errcode.TooLarge, "http.download", "%s is larger than the download cap (%d bytes); nothing was written", a.URL, len(res.Body))
	}
	// fsops writes a temp file and renames it: the file is whole or absent.
	if err := ws.WriteFile(a.DestPath, res.Body); err != nil {
		return fail(err)
	}
	return ok(map[string]any{"success": true, "path": a.DestPath, "bytes": len(res.Body)})
}

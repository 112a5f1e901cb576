package gwtools

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/registry"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

type runArgs struct {
	Argv      []string          `json:"argv,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	TimeoutMs int               `json:"timeoutMs,omitempty"`
	RequestID string            `json:"requestId,omitempty"`
}

func (p *Provider) runTool() registry.Tool {
	destructive := true
	return registry.Tool{
		Name:         "system.run",
		RunsCommands: true,
		Description: "Run a program (argv, no shell) in the workspace, after the operator's approval policy. " +
			"Returns {exitCode, stdout, stderr}, or {status: \"approval-pending\", requestId} when the operator must approve: " +
			"call system.run again with just that requestId once approved (the approved request is what runs).",
		InputSchema: schema(map[string]any{
			"argv":      map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 1},
			"cwd":       map[string]any{"type": "string", "description": "a directory of the workspace"},
			"env":       map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
			"timeoutMs": map[string]any{"type": "integer", "minimum": 1},
			"requestId": map[string]any{"type": "string", "description": "run the request the operator approved"},
		}),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive},
		Timeout:     DefaultRunTimeout + 5*time.Second,
		Handler:     p.run,
	}
}

func (p *Provider) run(ctx context.Context, call registry.Call) *mcp.CallToolResult {
	var a runArgs
	if err := decode(call.Args, &a); err != nil {
		return fail(err)
	}
	if p.opts.Approvals == nil {
		return failf(errcode.PermissionDenied, "system.run", "no approval policy is configured; the operator starts the daemon with --exec-approval-mode")
	}
	ws := p.workspace(call)
	var req RunRequest
	if a.RequestID != "" {
		approved, err := p.opts.Approvals.Take(a.RequestID)
		if err != nil {
			return failf(errcode.PermissionDenied, "system.run", "%v", err)
		}
		if len(a.Argv) > 0 || a.Cwd != "" || len(a.Env) > 0 {
			mine, err := p.runRequest(ws, a)
			if err != nil {
				return fail(err)
			}
			if !mine.equal(approved) {
				return failf(errcode.PermissionDenied, "system.run", "request %s was approved for %q in %s; it runs only as approved", a.RequestID, approved.Argv, approved.Cwd)
			}
		}
		req = approved
	} else {
		var err error
		if req, err = p.runRequest(ws, a); err != nil {
			return fail(err)
		}
		d := p.opts.Approvals.Check(req)
		if d.Pending != nil && p.opts.AskClient && call.Ask != nil {
			approved, res := p.askClient(ctx, call, d.Pending)
			if res != nil {
				return res
			}
			if approved {
				if req, err = p.opts.Approvals.Take(d.Pending.ID); err != nil {
					return failf(errcode.PermissionDenied, "system.run", "%v", err)
				}
				d = Decision{Allow: true}
			}
		}
		switch {
		case d.Allow:
		case d.Pending != nil:
			p.log.Info("system.run waits for the operator", "request_id", d.Pending.ID, "argv", req.Argv, "why", d.Pending.Reason)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
				`{"status":"approval-pending","requestId":%q,"reason":%q,"expires":%q}`+"\n"+
					"The operator must approve this command (GET /approvals, POST /approvals/%s). Once approved, call system.run with {\"requestId\": %q}.",
				d.Pending.ID, d.Pending.Reason, d.Pending.Expires.UTC().Format(time.RFC3339), d.Pending.ID, d.Pending.ID)}}}
		case !d.Allow:
			return failf(errcode.DangerousOperation, "system.run", "refused: %s", d.Reason)
		}
	}
	timeout := DefaultRunTimeout
	if a.TimeoutMs > 0 && time.Duration(a.TimeoutMs)*time.Millisecond < timeout {
		timeout = time.Duration(a.TimeoutMs) * time.Millisecond
	}
	// The command runs in, and is bound to, its cwd: a scope of the
	// workspace the sandbox opens once and binds by descriptor.
	if rel := strings.TrimPrefix(strings.TrimPrefix(req.Cwd, ws.Root()), "/"); rel != "" {
		scope, err := ws.Scope(rel)
		if err != nil {
			return fail(err)
		}
		defer scope.Close()
		ws = scope
	}
	res, err := p.opts.Executor.Run(ctx, sandbox.Request{Command: sandbox.CommandLine(req.Argv...), Workspace: ws, Env: req.Env, Timeout: timeout})
	if err != nil {
		return fail(err)
	}
	out := map[string]any{
		"exitCode": res.ExitCode,
		"stdout":   string(sandbox.WithTruncationNotice(res.Stdout, res.StdoutSize)),
		"stderr":   string(sandbox.WithTruncationNotice(res.Stderr, res.StderrSize)),
		"timedOut": res.TimedOut,
	}
	return ok(out)
}

// askSchema is what the client's user is asked for a pending system.run.
var askSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"approve": map[string]any{"type": "boolean", "title": "Run it", "description": "Run this command once"},
		"always":  map[string]any{"type": "boolean", "title": "Always allow this program", "description": "Add the program to the allowlist file", "default": false},
	},
	"required": []string{"approve"},
}

// askClient asks the person behind the MCP client about a pending request
// and records their decision as the operator's would be. approved says the
// request may now be taken; a non-nil result ends the call (declined). When
// the client cannot be asked (an error), the request stays pending and the
// call answers as if nobody had been asked.
func (p *Provider) askClient(ctx context.Context, call registry.Call, pend *Pending) (approved bool, res *mcp.CallToolResult) {
	msg := fmt.Sprintf("The agent asks to run %q in %s (%s). Approve?", pend.Request.Argv, pend.Request.Cwd, pend.Reason)
	if len(pend.Request.Env) > 0 {
		msg += fmt.Sprintf(" Environment: %v.", pend.Request.Env)
	}
	action, content, err := call.Ask(ctx, msg, askSchema)
	if err != nil {
		p.log.Info("system.run: asking the client failed; the request waits for the operator", "request_id", pend.ID, "err", err)
		return false, nil
	}
	yes, _ := content["approve"].(bool)
	always, _ := content["always"].(bool)
	yes = yes && action == "accept"
	decided, err := p.opts.Approvals.Decide(pend.ID, yes, yes && always)
	if err != nil {
		return false, failf(errcode.PermissionDenied, "system.run", "%v", err)
	}
	if p.opts.Decided != nil {
		p.opts.Decided(decided, yes, yes && always, "mcp-client:"+call.Remote)
	}
	if !yes {
		return false, failf(errcode.PermissionDenied, "system.run", "refused: the client's user did not approve %q (%s)", pend.Request.Argv, action)
	}
	return true, nil
}

// request builds the request an approval binds to: the argv, the cwd
// resolved in the workspace, the env, and the executable argv[0] resolves to.
func (p *Provider) runRequest(ws interface{ Resolve(string) (string, error) }, a runArgs) (RunRequest, error) {
	if len(a.Argv) == 0 || a.Argv[0] == "" {
		return RunRequest{}, &errcode.Error{Code: errcode.EmptyCommand, Op: "system.run", Msg: "argv is empty"}
	}
	cwd, err := ws.Resolve(a.Cwd)
	if err != nil {
		return RunRequest{}, err
	}
	exe, err := sandbox.LookPath(a.Argv[0], nil)
	if err != nil {
		return RunRequest{}, err
	}
	if !filepath.IsAbs(exe) {
		exe = filepath.Join(cwd, exe)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	if strings.ContainsRune(strings.Join(a.Argv, ""), 0) {
		return RunRequest{}, &errcode.Error{Code: errcode.InvalidArgument, Op: "system.run", Msg: "argv contains a NUL byte"}
	}
	return RunRequest{Argv: a.Argv, Cwd: cwd, Env: a.Env, Exe: exe}, nil
}

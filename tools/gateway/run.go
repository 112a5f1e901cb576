package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/registry"
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
	var (
		req    RunRequest
		sealed *sandbox.SealedProgram // a workspace program's copy: what runs
		id     string                 // the approval it runs under
	)
	defer func() { sealed.Close() }()
	if a.RequestID != "" {
		approved, err := p.opts.Approvals.Take(a.RequestID, ws.Root())
		if err != nil {
			return failf(errcode.PermissionDenied, "system.run", "%v", err)
		}
		if len(a.Argv) > 0 || a.Cwd != "" || len(a.Env) > 0 {
			mine, s, err := p.boundRequest(ws, a)
			s.Close()
			if err != nil {
				return fail(err)
			}
			if !mine.equal(approved) {
				return failf(errcode.PermissionDenied, "system.run", "request %s was approved for %q in %s; it runs only as approved", a.RequestID, approved.Argv, approved.Cwd)
			}
		}
		req, id = approved, a.RequestID
		if sealed, err = p.reseal(ws, req); err != nil {
			return fail(err)
		}
	} else {
		var err error
		if req, sealed, err = p.boundRequest(ws, a); err != nil {
			return fail(err)
		}
		d := p.opts.Approvals.Check(ws.Root(), req)
		if d.Pending != nil && p.opts.AskClient && call.Ask != nil {
			approved, res := p.askClient(ctx, call, d.Pending)
			if res != nil {
				return res
			}
			if approved {
				// The copy read for the question is the one that runs.
				if req, err = p.opts.Approvals.Take(d.Pending.ID, ws.Root()); err != nil {
					return failf(errcode.PermissionDenied, "system.run", "%v", err)
				}
				id, d = d.Pending.ID, Decision{Allow: true}
			}
		}
		switch {
		case d.Allow:
		case d.Pending != nil:
			p.log.Info("system.run waits for the operator", "request_id", d.Pending.ID, "argv", req.Argv, "executable", req.Exe, "digest", req.Digest, "why", d.Pending.Reason)
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
	if !inside(ws.Root(), req.Cwd) {
		return failf(errcode.PermissionDenied, "system.run", "the approved request runs in %s, outside this caller's workspace %s", req.Cwd, ws.Root())
	}
	// The command runs in, and is bound to, its cwd: a scope of the
	// workspace the sandbox opens once and binds by descriptor.
	dir, release, err := fsops.WorkDir(ws, strings.TrimPrefix(strings.TrimPrefix(req.Cwd, ws.Root()), "/"))
	if err != nil {
		return fail(err)
	}
	defer release()
	ws = dir
	// What was judged is what runs: the resolved executable by its
	// absolute path (no PATH search again, in the shell or the sandbox),
	// or the sealed copy of an approved workspace program.
	sreq := sandbox.Request{Workspace: ws, Env: req.Env, Timeout: timeout}
	if sealed != nil {
		sreq.Command, sreq.Stdin = sealed.Command(req.Argv[1:]...), sealed.Stdin()
	} else {
		sreq.Command = sandbox.CommandLine(append([]string{req.Exe}, req.Argv[1:]...)...)
	}
	p.log.Info("system.run", "executable", req.Exe, "digest", req.Digest, "argv", req.Argv, "cwd", req.Cwd, "request_id", id)
	begin := time.Now()
	res, err := p.opts.Executor.Run(ctx, sreq)
	if p.opts.Ran != nil {
		r := Ran{Executable: req.Exe, Digest: req.Digest, Argv: req.Argv, Cwd: req.Cwd, RequestID: id, Start: begin, Duration: time.Since(begin)}
		switch {
		case err != nil:
			r.Outcome = "error: " + err.Error()
		case res.TimedOut:
			r.Outcome = "timeout"
		default:
			r.Outcome = fmt.Sprintf("exit %d", res.ExitCode)
		}
		p.opts.Ran(call, r)
	}
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
		"always": map[string]any{"type": "boolean", "title": "Always allow this program",
			"description": "Add the program to the allowlist file (a program in the workspace is approved once only)", "default": false},
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
	msg += " Program: " + pend.Request.Exe
	if pend.Request.Digest != "" {
		msg += " (in the workspace; its content, " + pend.Request.Digest + ", is what runs)"
	}
	msg += "."
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
		p.opts.Decided(decided, yes, decided.Always, "mcp-client:"+call.Remote)
	}
	if decided.Note != "" {
		p.log.Info("system.run: "+decided.Note, "request_id", pend.ID)
	}
	if !yes {
		return false, failf(errcode.PermissionDenied, "system.run", "refused: the client's user did not approve %q (%s)", pend.Request.Argv, action)
	}
	return true, nil
}

// MaxProgramBytes bounds the sealed copy of a workspace program.
const MaxProgramBytes = 128 << 20

// boundRequest builds the request an approval binds to (runRequest) and,
// for a program in the workspace that the policy puts before the operator,
// reads that file once, through the workspace's handle, into a sealed copy
// (sandbox.SealProgram): its digest is the request's, and the copy is what
// runs. The caller closes it. A workspace program that needs no approval
// (mode full) runs by its path, like any other.
func (p *Provider) boundRequest(ws fsops.Workspace, a runArgs) (RunRequest, *sandbox.SealedProgram, error) {
	req, err := p.runRequest(ws, a)
	if err != nil || !p.opts.Approvals.bindsContent(req) {
		return req, nil, err
	}
	s, err := p.seal(ws, req.Exe)
	if err != nil {
		return RunRequest{}, nil, err
	}
	req.Digest = s.Digest()
	return req, s, nil
}

// runRequest resolves a call: the argv, the cwd resolved in the workspace,
// the env, and the executable argv[0] resolves to with the PATH the command
// gets, symlinks followed to the file itself.
func (p *Provider) runRequest(ws fsops.Workspace, a runArgs) (RunRequest, error) {
	if len(a.Argv) == 0 || a.Argv[0] == "" {
		return RunRequest{}, &errcode.Error{Code: errcode.EmptyCommand, Op: "system.run", Msg: "argv is empty"}
	}
	if strings.ContainsRune(strings.Join(a.Argv, ""), 0) {
		return RunRequest{}, &errcode.Error{Code: errcode.InvalidArgument, Op: "system.run", Msg: "argv contains a NUL byte"}
	}
	dir, release, err := fsops.WorkDir(ws, a.Cwd)
	if err != nil {
		return RunRequest{}, err
	}
	cwd := dir.Root()
	release()
	exe, err := resolveProgram(a.Argv[0], a.Env, cwd)
	if err != nil {
		return RunRequest{}, err
	}
	if !inside(ws.Root(), exe) && p.opts.Workspace != nil && inside(p.opts.Workspace.Root(), exe) {
		return RunRequest{}, &errcode.Error{Code: errcode.PathEscapeAttempt, Op: "system.run", Path: a.Argv[0],
			Msg: fmt.Sprintf("the program is %s, in the workspace but outside this caller's scope %s", exe, ws.Root())}
	}
	return RunRequest{Argv: a.Argv, Cwd: cwd, Env: a.Env, Exe: exe}, nil
}

// resolveProgram finds the file name runs as, as the command would: a name
// with a slash relative to cwd, any other along the PATH the command gets
// (env's, else the sandbox's; an empty or relative entry is relative to
// cwd, as execvp has it), then every symlink followed: the result is the
// absolute path of a regular, executable file, which is what runs (by that
// path). A link is thus judged and run as its target: a link in the
// workspace named git that points at /usr/bin/git is /usr/bin/git, and the
// agent retargeting it later changes nothing.
func resolveProgram(name string, env map[string]string, cwd string) (string, error) {
	found := name
	if !strings.Contains(name, "/") {
		var lookEnv map[string]string
		if path, ok := env["PATH"]; ok {
			dirs := filepath.SplitList(path)
			for i, d := range dirs {
				if !filepath.IsAbs(d) {
					dirs[i] = filepath.Join(cwd, d)
				}
			}
			lookEnv = map[string]string{"PATH": strings.Join(dirs, string(filepath.ListSeparator))}
		}
		var err error
		if found, err = sandbox.LookPath(name, lookEnv); err != nil {
			return "", err
		}
	} else if !filepath.IsAbs(found) {
		found = filepath.Join(cwd, found)
	}
	real, err := filepath.EvalSymlinks(found)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(real); err == nil && (!fi.Mode().IsRegular() || fi.Mode()&0o111 == 0) {
			err = errors.New("not an executable file")
		}
	}
	if err != nil {
		return "", &errcode.Error{Code: errcode.MissingUtilities, Op: "system.run", Command: name, Path: found, Msg: "cannot run it: " + err.Error(), Err: err}
	}
	return real, nil
}

// seal reads the workspace program exe (absolute) through ws's handle into
// a sealed copy, and refuses a script whose interpreter the
// agent could change (a relative path, or one in the workspace): the
// kernel would start that file by its name.
func (p *Provider) seal(ws fsops.Workspace, exe string) (*sandbox.SealedProgram, error) {
	if !inside(ws.Root(), exe) {
		return nil, &errcode.Error{Code: errcode.PermissionDenied, Op: "system.run", Path: exe, Msg: "the program is outside this caller's workspace " + ws.Root()}
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(exe, ws.Root()), "/")
	f, err := ws.OpenFile(rel, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode.IsRegular() || fi.Mode&0o111 == 0 {
		return nil, &errcode.Error{Code: errcode.PermissionDenied, Op: "system.run", Path: exe, Msg: "not an executable file"}
	}
	var head prefix
	s, err := sandbox.SealProgram(io.TeeReader(f, &head), MaxProgramBytes)
	if err != nil {
		return nil, err
	}
	if interp, ok := shebang(head.b); ok {
		why := ""
		if !filepath.IsAbs(interp) {
			why = "a relative path, found from the cwd at run time"
		} else if p.inWorkspace(ws, interp) {
			why = "in the workspace, which the agent can change"
		}
		if why != "" {
			s.Close()
			return nil, &errcode.Error{Code: errcode.PermissionDenied, Op: "system.run", Path: exe,
				Msg: fmt.Sprintf("the script's interpreter %s is %s: run the interpreter as the program, with the script as its argument", interp, why)}
		}
	}
	return s, nil
}

// reseal makes the sealed copy an approved workspace program runs: the file
// read again, through the caller's workspace, and its digest compared with
// the approved one. A program that changed since does not run.
func (p *Provider) reseal(ws fsops.Workspace, req RunRequest) (*sandbox.SealedProgram, error) {
	if req.Digest == "" {
		return nil, nil
	}
	s, err := p.seal(ws, req.Exe)
	if err != nil {
		return nil, err
	}
	if s.Digest() != req.Digest {
		s.Close()
		return nil, &errcode.Error{Code: errcode.PermissionDenied, Op: "system.run", Path: req.Exe,
			Msg: fmt.Sprintf("%s changed since it was approved (approved %s, now %s); nothing ran: ask for approval again", req.Exe, req.Digest, s.Digest())}
	}
	return s, nil
}

// prefix keeps the first bytes written to it (a script's #! line).
type prefix struct{ b []byte }

func (h *prefix) Write(p []byte) (int, error) {
	if n := 256 - len(h.b); n > 0 {
		h.b = append(h.b, p[:min(n, len(p))]...)
	}
	return len(p), nil
}

// shebang returns the interpreter a script's #! line names.
func shebang(head []byte) (string, bool) {
	line, ok := bytes.CutPrefix(head, []byte("#!"))
	if !ok {
		return "", false
	}
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(string(line))
	if len(f) == 0 {
		return "", false
	}
	return f[0], true
}

// inWorkspace reports whether path, or the file its symlinks lead to, is
// in the caller's workspace or the daemon's.
func (p *Provider) inWorkspace(ws fsops.Workspace, path string) bool {
	paths := []string{filepath.Clean(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		paths = append(paths, real)
	}
	for _, c := range paths {
		if inside(ws.Root(), c) || (p.opts.Workspace != nil && inside(p.opts.Workspace.Root(), c)) {
			return true
		}
	}
	return false
}

// inside reports whether p is root or below it (both absolute and clean).
func inside(root, p string) bool {
	return p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/")
}

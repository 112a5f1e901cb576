package workspace

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/tooltext"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// The tools of a workspace that can execute (toolList): exec, which runs a
// command through a sandbox.Executor, and grep, which runs in Go through
// Workspace.Grep but is offered exactly where the reference offers it.

type execArgs struct {
	Command string            `json:"command"`
	Env     map[string]string `json:"env"`
	// The options; without them exec answers as the reference's does.
	Timeout *int    `json:"timeout"` // seconds, at most the daemon's limit
	Cwd     *string `json:"cwd"`     // a directory of the workspace
	Stderr  *string `json:"stderr"`  // "separate" or "merged": both streams in a structured result
	// Transaction (a boolean where the schema offers it) runs the command
	// on a copy-on-write overlay of the workspace (ExecEnv.Transact). It
	// is kept raw because it is read even where the schema does not offer
	// it: a client asking for a transaction there, in any form, is refused
	// rather than having its command run on the workspace itself.
	Transaction json.RawMessage `json:"transaction"`
}

// execEnv is what exec needs besides the call's workspace, passed in rather
// than read from a Server: the executor, the time limit of one command (0:
// the executor's default), and the workspace the tools were built for
// (base), so that exec in a scope below it creates the scope's directory;
// noNetwork is ExecEnv.NoNetwork.
type execEnv struct {
	executor  sandbox.Executor
	timeout   time.Duration
	base      fsops.Workspace
	noNetwork string
	transact  func(ctx context.Context, ws fsops.Workspace, req sandbox.Request) *mcp.CallToolResult
}

// execTool is the exec tool running commands in env. Its schema offers
// `transaction` only where env runs transactions: without them exec's
// schema is the reference's, byte for byte.
func execTool(env execEnv) tool[execArgs] {
	props := schema{
		"command": str("Shell command to execute"),
		"env":     strMap("Optional environment variables to set for this command"),
		"timeout": posInt("Optional: seconds after which the command is killed (at most the daemon's own limit, which applies without it)"),
		"cwd":     str("Optional: the directory of the workspace to run in (default: its root)"),
		"stderr": enum("Optional: answer with a JSON object holding the exit code and both streams, "+
			"\"separate\" ({exitCode, stdout, stderr}) or \"merged\" ({exitCode, output}: stderr interleaved with stdout as written)", "separate", "merged"),
	}
	if env.transact != nil {
		props["transaction"] = boolean("Optional: run the command as a transaction, on a copy-on-write view of the workspace (bwrap isolation only): " +
			"the workspace is left untouched and the answer lists the changes (with diffs) and a transaction id for transaction_apply or transaction_discard")
	}
	return tool[execArgs]{
		Name:         "exec",
		Title:        "Execute command",
		Description:  "Execute a shell command in the workspace directory. Not available for memory backends. On success returns stdout; on a non-zero exit, an error with the exit code and stderr (or stdout). Long output keeps its head and tail; a command that runs too long is killed and what it printed is returned.",
		Annotations:  &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(true)},
		Schema:       obj(props, required("command")),
		Timeout:      cmp.Or(env.timeout, sandbox.DefaultTimeout) + execGrace,
		RunsCommands: true,
		Handler:      env.exec,
	}
}

// execGrace is how much longer than the command's own time limit the
// registry waits for exec, so that exec's kill-and-report (the output
// printed before the timeout) answers, not the registry's deadline.
const execGrace = 5 * time.Second

func (env execEnv) exec(ctx context.Context, ws fsops.Workspace, a execArgs) *mcp.CallToolResult {
	if jsTrim(a.Command) == "" {
		return toolError("Command cannot be empty")
	}
	// A scope's directory is created on first use; exec may be the first.
	if ws != env.base {
		if err := ws.Mkdir(".", true); err != nil {
			return failure(failMkdir, ".", err)
		}
	}
	req := sandbox.Request{
		Command:   a.Command,
		Workspace: ws,
		Env:       a.Env,
		Timeout:   env.timeout,
	}
	if fail := env.options(ws, a, &req); fail != nil {
		return fail
	}
	if tx := string(a.Transaction); tx != "" && tx != "false" && tx != "null" {
		if env.transact == nil {
			// Never run it on the workspace itself: the caller asked for
			// its changes to wait for transaction_apply.
			return toolError("Transactions are off: the command did not run. The daemon serves exec's transaction argument only with --transactions (and --isolation bwrap); without it, run the command without transaction")
		}
		// validateArgs held it to the schema's boolean, and it is not false.
		return env.transact(ctx, ws, req)
	}
	var pp *progressPump
	if p := progressFrom(ctx); p != nil {
		pp = newProgressPump(ctx, p)
		req.OnOutput = pp.add
	}
	res, err := env.executor.Run(ctx, req)
	if pp != nil {
		pp.stop() // every notification before the result
	}
	if err != nil {
		return toolError(execErrorText(err))
	}
	if a.Stderr != nil {
		return structuredResult(res, *a.Stderr == "merged", env.note(res))
	}
	stdout := jsTrim(string(sandbox.WithTruncationNotice(res.Stdout, res.StdoutSize)))
	stderr := jsTrim(string(sandbox.WithTruncationNotice(res.Stderr, res.StderrSize)))
	timeout := req.Timeout
	if res.TimedOut {
		// We do better than the reference (which waits forever): say that
		// it was killed, after how long, and give what it printed.
		var b strings.Builder
		fmt.Fprintf(&b, "Command timed out after %s and was killed.", roundDuration(timeout, res.Duration))
		if stdout == "" && stderr == "" {
			b.WriteString(" It printed nothing before the timeout.")
		}
		if stdout != "" {
			b.WriteString("\n[stdout before the timeout]\n" + stdout)
		}
		if stderr != "" {
			b.WriteString("\n[stderr before the timeout]\n" + stderr)
		}
		return toolError(b.String())
	}
	if res.ExitCode != 0 {
		msg := stderr
		if msg == "" {
			msg = stdout
		}
		code := strconv.Itoa(res.ExitCode)
		if res.Signal != "" {
			code += " (killed by signal " + res.Signal + ")"
		}
		text := "Command execution failed with exit code " + code + ": " + msg
		if note := env.note(res); note != "" {
			text += "\n" + note
		}
		return toolError(text)
	}
	return textResult(stdout)
}

// note is the network line for a finished command: only a failed one
// (exit code not 0, not a timeout) whose output shows a network failure,
// and only when commands run without network.
func (env execEnv) note(res sandbox.Result) string {
	if res.ExitCode == 0 || res.TimedOut || env.noNetwork == "" {
		return ""
	}
	return networkNote(env.noNetwork, string(res.Stderr)+"\n"+string(res.Stdout))
}

// options applies exec's optional arguments to req: a timeout no longer
// than the daemon's, a working directory the workspace resolves (an
// escape is refused as any path is), merged streams. A non-nil result is
// the refusal.
func (env execEnv) options(ws fsops.Workspace, a execArgs, req *sandbox.Request) *mcp.CallToolResult {
	if a.Timeout != nil {
		max := cmp.Or(env.timeout, sandbox.DefaultTimeout)
		t := time.Duration(*a.Timeout) * time.Second
		if *a.Timeout <= 0 || t > max {
			return toolError(fmt.Sprintf("Invalid timeout %d: from 1 to %d seconds (the daemon's --exec-timeout)", *a.Timeout, int(max/time.Second)))
		}
		req.Timeout = t
	}
	if a.Cwd != nil {
		// The one cwd rule (fsops.WorkDir); the command stays bounded by
		// ws and starts in the directory.
		dir, release, err := fsops.WorkDir(ws, *a.Cwd)
		switch {
		case fsops.IsCwdNotDir(err):
			return toolError("Invalid cwd " + *a.Cwd + ": not a directory")
		case err != nil:
			return failure(failCwd, *a.Cwd, err)
		}
		if dir != ws {
			req.Dir = dir.Root()
		}
		release()
	}
	if a.Stderr != nil {
		switch *a.Stderr {
		case "separate":
		case "merged":
			req.MergeStderr = true
		default:
			return toolError(`Invalid stderr "` + *a.Stderr + `": "separate" or "merged"`)
		}
	}
	return nil
}

// structuredResult is exec's answer when the caller asked for both
// streams: {exitCode, stdout, stderr} or {exitCode, output}, plus signal
// and timedOut when they apply, and note (networkNote) when it is not
// empty; an error result unless the exit code is 0.
func structuredResult(res sandbox.Result, merged bool, note string) *mcp.CallToolResult {
	out := map[string]any{"exitCode": res.ExitCode}
	stdout := string(sandbox.WithTruncationNotice(res.Stdout, res.StdoutSize))
	if merged {
		out["output"] = stdout
	} else {
		out["stdout"] = stdout
		out["stderr"] = string(sandbox.WithTruncationNotice(res.Stderr, res.StderrSize))
	}
	if res.Signal != "" {
		out["signal"] = res.Signal
	}
	if res.TimedOut {
		out["timedOut"] = true
	}
	if note != "" {
		out["note"] = note
	}
	b, _ := json.Marshal(out)
	r := textResult(string(b))
	r.IsError = res.ExitCode != 0 || res.TimedOut
	return r
}

func roundDuration(configured, took time.Duration) time.Duration {
	if configured > 0 {
		return configured
	}
	return took.Round(time.Second)
}

func execErrorText(err error) string {
	if text, ok := policy.RefusalText(err); ok {
		return text
	}
	var e *errcode.Error
	if !errors.As(err, &e) {
		return "Failed to execute command: " + err.Error()
	}
	switch e.Code {
	case errcode.EmptyCommand:
		return "Command cannot be empty"
	case errcode.PathEscapeAttempt:
		if e.Msg != "" {
			return e.Msg
		}
		return "Command failed safety check"
	case errcode.Timeout:
		return "Command timed out: " + tooltext.Reason(e)
	}
	return "Failed to execute command: " + tooltext.Reason(e)
}

type grepArgs struct {
	Pattern         string `json:"pattern"`
	Path            string `json:"path"`
	Glob            string `json:"glob"`
	Type            string `json:"type"`
	OutputMode      string `json:"outputMode"`
	CaseInsensitive bool   `json:"caseInsensitive"`
	Multiline       bool   `json:"multiline"`
	ContextBefore   *int   `json:"contextBefore"`
	ContextAfter    *int   `json:"contextAfter"`
	ContextAround   *int   `json:"contextAround"`
	LineNumbers     bool   `json:"lineNumbers"`
	HeadLimit       int    `json:"headLimit"`
}

var grepTool = tool[grepArgs]{
	Name:        "grep",
	Title:       "Search file contents",
	Description: "Search file contents with a regular expression (ripgrep semantics and output; ripgrep need not be installed). Returns matching file paths, per-file match counts, or match content. Respects .gitignore by default. Parameter shape mirrors Claude Code's Grep tool.",
	Annotations: readOnly,
	Schema: obj(schema{
		"pattern":         str("Regex pattern to search for"),
		"path":            str("File or directory to search in. Defaults to the workspace root."),
		"glob":            str(`Glob to filter which files are searched (e.g. "*.ts", "src/**/*.py")`),
		"type":            str(`Ripgrep file-type name (e.g. "js", "py", "rust"). See ` + "`rg --type-list`."),
		"outputMode":      enum(`"files_with_matches" (default) returns matching paths; "count" returns per-file match counts; "content" returns matching lines.`, "content", "files_with_matches", "count"),
		"caseInsensitive": boolean("Case-insensitive matching (rg -i)."),
		"multiline":       boolean("Allow patterns to match across newlines (rg -U --multiline-dotall)."),
		"contextBefore":   nonNegInt("Lines of context before each match (rg -B). Use 0 for none. Ignored outside content mode."),
		"contextAfter":    nonNegInt("Lines of context after each match (rg -A). Use 0 for none. Ignored outside content mode."),
		"contextAround":   nonNegInt("Lines of context on both sides of each match (rg -C). Use 0 for none. Ignored outside content mode. An explicit contextBefore/contextAfter overrides this for that side, exactly as rg does."),
		"lineNumbers":     boolean("Prefix content-mode output with line numbers (rg -n). Ignored for other output modes."),
		"headLimit":       posInt("Cap result to the first N output lines (applied after search)."),
	}, required("pattern")),
	Handler: grep,
}

func grep(ctx context.Context, ws fsops.Workspace, a grepArgs) *mcp.CallToolResult {
	mode := a.OutputMode
	if mode == "" {
		mode = "files_with_matches"
	}
	// Models fill optional fields with neutral values, so context is
	// resolved the way rg resolves -B/-A/-C (explicit side wins) and only
	// used in content mode.
	var before, after int
	if mode == "content" {
		if a.ContextAround != nil {
			before, after = *a.ContextAround, *a.ContextAround
		}
		if a.ContextBefore != nil {
			before = *a.ContextBefore
		}
		if a.ContextAfter != nil {
			after = *a.ContextAfter
		}
	}
	res, err := ws.Grep(ctx, fsops.GrepOptions{
		Pattern: a.Pattern, Path: a.Path, Glob: a.Glob, Type: a.Type, OutputMode: mode,
		CaseInsensitive: a.CaseInsensitive, Multiline: a.Multiline,
		Before: before, After: after,
		LineNumbers: a.LineNumbers && mode == "content",
		HeadLimit:   a.HeadLimit,
	})
	if err != nil {
		p := a.Path
		if p == "" {
			p = "."
		}
		return failure(failGrep, p, err)
	}
	if res.Output == "" {
		return textResult("No matches found")
	}
	return textResult(res.Output)
}

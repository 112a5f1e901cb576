package gateway

import (
	"context"
	"encoding/base64"
	"io/fs"
	"path"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

type fsReadArgs struct {
	Path     string `json:"path"`
	Encoding string `json:"encoding,omitempty"` // utf8 (default) or base64
}

type fsWriteArgs struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
	Atomic   *bool  `json:"atomic,omitempty"` // writes are always atomic; false is refused
}

type fsListArgs struct {
	Path      string `json:"path,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
}

type fsGlobArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path,omitempty"`
}

type fsDeleteArgs struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

type entry struct {
	Path string `json:"path"`
	Type string `json:"type"` // file, dir, symlink, other
	Size int64  `json:"size"`
}

func (p *Provider) fsTools() []registry.Tool {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	encoding := map[string]any{"type": "string", "enum": []string{"utf8", "base64"}}
	tools := []registry.Tool{
		{Name: "fs.read", Description: "Read a file of the workspace (at most 2 MiB). Returns {content, size, encoding}; a file that is not UTF-8 text comes back as base64.",
			InputSchema: schema(map[string]any{"path": map[string]any{"type": "string"}, "encoding": encoding}, "path"), Annotations: ro, Handler: p.fsRead},
		{Name: "fs.write", Description: "Write a file of the workspace atomically (at most 2 MiB), creating its directories. Returns {success, path, bytes}.",
			InputSchema: schema(map[string]any{"path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}, "encoding": encoding, "atomic": map[string]any{"type": "boolean"}}, "path", "content"),
			Handler:     p.fsWrite},
		{Name: "fs.list", Description: "List a directory of the workspace, or its whole tree with recursive. Returns {entries: [{path, type, size}], truncated}.",
			InputSchema: schema(map[string]any{"path": map[string]any{"type": "string"}, "recursive": map[string]any{"type": "boolean"}}), Annotations: ro, Handler: p.fsList},
		{Name: "fs.glob", Description: "Find the paths of the workspace matching a glob (**, {a,b}, dot files), under path. Returns {paths, truncated}.",
			InputSchema: schema(map[string]any{"pattern": map[string]any{"type": "string"}, "path": map[string]any{"type": "string"}}, "pattern"), Annotations: ro, Handler: p.fsGlob},
	}
	destructive := true
	tools = append(tools, registry.Tool{Name: "fs.delete", Description: "Delete a file (or a directory with recursive) of the workspace. Disabled unless the operator starts the daemon with --fs-delete.",
		InputSchema: schema(map[string]any{"path": map[string]any{"type": "string"}, "recursive": map[string]any{"type": "boolean"}}, "path"),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &destructive}, Handler: p.fsDelete})
	return tools
}

func (p *Provider) fsRead(_ context.Context, call registry.Call) *mcp.CallToolResult {
	var a fsReadArgs
	if err := decode(call.Args, &a); err != nil {
		return fail(err)
	}
	ws := p.workspace(call)
	fi, err := ws.Stat(a.Path)
	if err != nil {
		return fail(err)
	}
	if fi.IsDir() {
		return failf(errcode.IsADirectory, "fs.read", "%s is a directory; use fs.list", a.Path)
	}
	if fi.Size > p.opts.MaxFileBytes {
		return failf(errcode.TooLarge, "fs.read", "%s is %d bytes; the limit is %d", a.Path, fi.Size, p.opts.MaxFileBytes)
	}
	data, err := ws.ReadFile(a.Path)
	if err != nil {
		return fail(err)
	}
	if int64(len(data)) > p.opts.MaxFileBytes {
		return failf(errcode.TooLarge, "fs.read", "%s is over the limit of %d bytes", a.Path, p.opts.MaxFileBytes)
	}
	enc := a.Encoding
	if enc == "" {
		enc = "utf8"
		if !utf8.Valid(data) {
			enc = "base64"
		}
	}
	content := string(data)
	switch enc {
	case "base64":
		content = base64.StdEncoding.EncodeToString(data)
	case "utf8":
		if !utf8.Valid(data) {
			return failf(errcode.InvalidArgument, "fs.read", "%s is not UTF-8 text; ask for encoding base64", a.Path)
		}
	default:
		return failf(errcode.InvalidArgument, "fs.read", "encoding %q: utf8 or base64", enc)
	}
	return ok(map[string]any{"content": content, "size": len(data), "encoding": enc})
}

func (p *Provider) fsWrite(_ context.Context, call registry.Call) *mcp.CallToolResult {
	var a fsWriteArgs
	if err := decode(call.Args, &a); err != nil {
		return fail(err)
	}
	if a.Atomic != nil && !*a.Atomic {
		return failf(errcode.InvalidArgument, "fs.write", "writes are always atomic; leave atomic out or true")
	}
	data := []byte(a.Content)
	switch a.Encoding {
	case "", "utf8":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(a.Content); err != nil {
			return failf(errcode.InvalidArgument, "fs.write", "content is not base64: %v", err)
		}
	default:
		return failf(errcode.InvalidArgument, "fs.write", "encoding %q: utf8 or base64", a.Encoding)
	}
	if int64(len(data)) > p.opts.MaxFileBytes {
		return failf(errcode.TooLarge, "fs.write", "%d bytes; the limit is %d", len(data), p.opts.MaxFileBytes)
	}
	if err := p.workspace(call).WriteFile(a.Path, data); err != nil {
		return fail(err)
	}
	return ok(map[string]any{"success": true, "path": a.Path, "bytes": len(data)})
}

func kind(fi fsops.Info) string {
	switch {
	case fi.Mode.IsDir():
		return "dir"
	case fi.Mode.IsRegular():
		return "file"
	case fi.Mode&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

func (p *Provider) fsList(ctx context.Context, call registry.Call) *mcp.CallToolResult {
	var a fsListArgs
	if err := decode(call.Args, &a); err != nil {
		return fail(err)
	}
	if a.Path == "" {
		a.Path = "."
	}
	ws := p.workspace(call)
	var out []entry
	truncated := false
	queue := []string{a.Path}
	for len(queue) > 0 && !truncated {
		if ctx.Err() != nil {
			return fail(&errcode.Error{Code: errcode.Timeout, Op: "fs.list", Msg: ctx.Err().Error()})
		}
		dir := queue[0]
		queue = queue[1:]
		infos, err := ws.ReadDir(dir)
		if err != nil {
			if dir == a.Path {
				return fail(err)
			}
			continue
		}
		for _, fi := range infos {
			rel := path.Join(dir, fi.Name)
			out = append(out, entry{Path: rel, Type: kind(fi), Size: fi.Size})
			if len(out) == MaxListEntries {
				truncated = true
				break
			}
			if a.Recursive && fi.Mode.IsDir() {
				queue = append(queue, rel)
			}
		}
	}
	if out == nil {
		out = []entry{}
	}
	return ok(map[string]any{"entries": out, "truncated": truncated})
}

func (p *Provider) fsGlob(ctx context.Context, call registry.Call) *mcp.CallToolResult {
	var a fsGlobArgs
	if err := decode(call.Args, &a); err != nil {
		return fail(err)
	}
	if a.Path == "" {
		a.Path = "."
	}
	paths, err := p.workspace(call).Search(ctx, a.Path, a.Pattern, fsops.SearchOptions{})
	if err != nil {
		return fail(err)
	}
	truncated := len(paths) > MaxListEntries
	if truncated {
		paths = paths[:MaxListEntries]
	}
	if paths == nil {
		paths = []string{}
	}
	return ok(map[string]any{"paths": paths, "truncated": truncated})
}

func (p *Provider) fsDelete(_ context.Context, call registry.Call) *mcp.CallToolResult {
	if !p.opts.AllowDelete {
		return failf(errcode.PermissionDenied, "fs.delete", "deleting is disabled; the operator enables it with --fs-delete")
	}
	var a fsDeleteArgs
	if err := decode(call.Args, &a); err != nil {
		return fail(err)
	}
	if err := p.workspace(call).Remove(a.Path, fsops.RemoveOptions{Recursive: a.Recursive}); err != nil {
		return fail(err)
	}
	return ok(map[string]any{"success": true})
}

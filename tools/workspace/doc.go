// Package workspace is the workspace tools provider of the tool registry: the
// file tools and exec/grep of docs/mcp.md (read_text_file, write_file,
// edit_file, list_directory, ..., exec, grep), with the names, arguments and
// result texts of agent-backend 0.13.2 that the published clients and the
// prompts written against them depend on.
//
// Tools returns them as registry.Tools for one workspace and executor; the
// daemon sets them as the registry's "workspace" provider and every face
// (MCP in package mcphttp) serves them from there. A handler gets
// registry.Call: its Args are validated against the tool's input schema
// (validate.go) and decoded into the tool's arguments type, with the error
// texts of the reference, and its Workspace is the one the face resolved
// (the root, or the request's scope). Each tool is one value (tool[Args] in
// tools.go) declared with its arguments type and handler in tools_read.go,
// tools_write.go, tools_dirs.go or tools_exec.go.
//
// The package touches files only through fsops.Workspace and starts
// processes only through sandbox.Executor. Every failure is a tool result
// with isError set and a message naming the path or limit (errors.go).
package workspace

// Package extensions serves tools written in Starlark: each *.star file of
// the extensions directory (--extensions) defines describe_extension(),
// which returns Extension(name, version, description, tools=[Tool(...)],
// allowed_exec=[...], env=[...]); its tools join the registry as
// extension__tool. Files are reloaded when they change; a file that fails to
// load keeps its last good version serving. docs/extensions.md is the guide.
//
// Start here: extension.go (the builtins Extension, Tool, ToolParameter and
// loading one file), call.go (a call: arguments converted, the handler run
// under a step limit and the call's deadline, the result converted back),
// modules.go (exec, http, fs, env — each through the daemon's doors:
// sandbox, netguard, fsops — and time, math, json), provider.go (the
// directory, the registry provider, hot reload, health), convert.go (JSON
// ↔ Starlark) and testing.go (the *_test.star runner of `ext test`).
package extensions

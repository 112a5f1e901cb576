// Package extensions serves tools written in Starlark: each *.star file of
// the extensions directory (--extensions) defines describe_extension(),
// which returns Extension(name, version, description, tools=[Tool(...)],
// allowed_exec=[...], env=[...], allowed_db_hosts=[...]); its tools join
// the registry as extension__tool. Files are reloaded when they change; a
// file that fails to load keeps its last good version serving.
// docs/extensions.md is the guide.
//
// Start here: extension.go (the builtins Extension, Tool, ToolParameter and
// reading one file's describe_extension), provider.go (the directory, the
// registry provider, hot reload, health, and a call: arguments converted,
// the handler run on a goroutine of its own under a step limit and the
// call's deadline, the result converted back), modules.go (exec, http, fs,
// env — each through the daemon's doors: sandbox, netguard, fsops — and
// time, math, json), text.go (str, repr, print, fail and the json module,
// bounded in nesting and size), sqlite.go (database files of the
// workspace, read through an fsops descriptor into an in-memory database),
// postgres.go (PostgreSQL servers, every connection dialled through
// netguard), sql.go (what the two share: bound parameters, rows and their
// bounds), convert.go (JSON ↔ Starlark) and testing.go (the *_test.star
// runner of `ext test`).
package extensions

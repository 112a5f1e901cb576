// Package sites serves tool sites (docs/sites.md): a directory of Markdown
// pages whose frontmatter lists the argv patterns an agent may run. An
// agent reads a page with GET /{path} and runs an allowed command with
// POST /{path}, the protocol of `statespace serve`, on the daemon's doors:
// pages are resolved and read through fsops, commands run through sandbox
// without a shell, and the curl builtin goes through netguard.
//
// Start here: site.go (Site, Read and Run: a request validated against the
// page's specs, then run), spec.go and frontmatter.go (the patterns and how
// a page declares them), components.go (a page's component blocks replaced
// by their output), agents.go (AGENTS.md and index.html, written when the
// site lacks them, or served from memory where it cannot be written; the
// overview), handler.go (the HTTP handler, behind the admission of
// internal/admit that every server of a site passes: the daemon's /site/
// and `site serve` alike) and tools.go (the read_page and run_command tools the registry
// serves on every face). The operator's --env-file is read by envfile.go,
// the package's one file access outside fsops (docs/architecture.md's
// doors table).
package sites

package upstream

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// hostDirs are visible read-only in every bwrap sandbox already (sandbox's
// system directories); nothing under them needs a bind of its own.
var hostDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// readOnlyPaths is what a server needs to see under bwrap besides the
// system: its command and the existing host paths its arguments name,
// widened to what makes them run (the outermost node_modules directory of a
// Node package, where its dependencies resolve; a Python virtual
// environment's root), plus the configured readOnly list. Paths in the
// workspace (bound read-write) and in the system directories are left out.
// lookPath finds a bare command name on the server's PATH.
func readOnlyPaths(s *Server, workspace string, lookPath func(string) (string, error)) []string {
	var out []string
	add := func(p string) {
		if p == "" || !filepath.IsAbs(p) {
			return
		}
		p = filepath.Clean(p)
		if within(workspace, p) {
			return
		}
		for _, d := range hostDirs {
			if within(d, p) {
				return
			}
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	consider := func(p string) {
		if !filepath.IsAbs(p) {
			return
		}
		if _, err := os.Stat(p); err != nil {
			return
		}
		// Both the name as given and where its links lead must be visible.
		for _, q := range []string{p, realPath(p)} {
			add(widen(q))
		}
	}
	cmd := s.Command
	if !strings.Contains(cmd, "/") && lookPath != nil {
		if p, err := lookPath(cmd); err == nil {
			cmd = p
		}
	}
	consider(cmd)
	for _, a := range s.Args {
		consider(a)
		// --flag=/path
		if _, v, ok := strings.Cut(a, "="); ok {
			consider(v)
		}
	}
	for _, p := range s.ReadOnly {
		add(p)
	}
	return out
}

func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// widen maps a path to the tree that must be visible for it to run.
func widen(p string) string {
	parts := strings.Split(p, string(filepath.Separator))
	for i, part := range parts {
		if part == "node_modules" {
			// Node resolves a package's dependencies in the node_modules
			// directories above it, up to the outermost one.
			return strings.Join(parts[:i+1], string(filepath.Separator))
		}
	}
	for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "pyvenv.cfg")); err == nil {
			return d
		}
	}
	return p
}

// within reports whether p is dir or below it (whole path components).
func within(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

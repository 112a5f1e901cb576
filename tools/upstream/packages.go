package upstream

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Package caches: a server launched with npx or uvx downloads its package at
// start and keeps it in a cache, which must be writable and outside
// the workspace (the agent could otherwise plant code the server runs).
// Each server gets a directory of its own, <dir>/<name>, bound read-write
// under bwrap, and the package managers are pointed at it through their
// environment. npm is also told to prefer that cache to the registry, so a
// server whose package is cached restarts without the network.

// cacheEnv is the environment that points the package managers at a
// server's cache directory; the server's own env wins over it.
func cacheEnv(dir string) map[string]string {
	return map[string]string{
		"npm_config_cache":           filepath.Join(dir, "npm"),
		"npm_config_prefer_offline":  "true",
		"npm_config_update_notifier": "false",
		"UV_CACHE_DIR":               filepath.Join(dir, "uv"),
		"UV_TOOL_DIR":                filepath.Join(dir, "uv-tools"),
		"XDG_CACHE_HOME":             filepath.Join(dir, "xdg"),
	}
}

// packageCacheRoot resolves the directory the servers' caches live in:
// dir as configured, or the user's cache directory's agentbe/upstreams.
// It is created (0700) and refused inside the workspace.
func packageCacheRoot(dir, workspace string) (string, error) {
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("--upstream-cache-dir is not set and there is no user cache directory (%v); set it", err)
		}
		dir = filepath.Join(base, "agentbe", "upstreams")
	}
	if !filepath.IsAbs(dir) {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", fmt.Errorf("--upstream-cache-dir %s: %v", dir, err)
		}
		dir = abs
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("--upstream-cache-dir %s: %v", dir, err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("--upstream-cache-dir %s: %v", dir, err)
	}
	ws := workspace
	if r, err := filepath.EvalSymlinks(workspace); err == nil {
		ws = r
	}
	if within(ws, real) || within(real, ws) {
		return "", errors.New("--upstream-cache-dir " + dir + " overlaps the workspace " + workspace +
			": the agent could change the packages the MCP servers run; use a directory outside it")
	}
	return real, nil
}

// serverCacheDir creates the cache directory of one server.
func serverCacheDir(root, name string) (string, error) {
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("upstream %s: cache directory: %v", name, err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("upstream %s: cache directory %s is not a directory", name, dir)
	}
	return dir, nil
}

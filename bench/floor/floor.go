// Package floor is what the daemon's work costs with none of the daemon: the
// baselines the benchmarks and bench/compare.sh measure next to it.
package floor

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
)

// EchoHandler is the floor of an MCP tools/call over HTTP: it decodes the
// JSON-RPC request, reads path and encodes a tools/call result with the
// file as text. No MCP session, schema or routing: plain net/http and
// encoding/json.
func EchoHandler(path string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"params"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"jsonrpc": "2.0", "id": req.ID,
			"result": map[string]any{"content": []map[string]any{{"type": "text", "text": string(b)}}},
		})
	})
}

// Bwrap is a bare bubblewrap command line with the mounts and namespaces
// the sandbox executor uses (sandbox/bwrap.go: all namespaces unshared but
// the network, capabilities dropped, the system directories and the usual
// /etc files read-only, /proc, /dev, a tmpfs /tmp, a new session, dir bound
// read-write at its own path), ready for the command to append. It is the
// floor of exec under bwrap: bubblewrap itself, with nothing of the daemon.
func Bwrap(dir string) []string {
	args := []string{"bwrap", "--unshare-all", "--share-net", "--die-with-parent", "--cap-drop", "ALL"}
	for _, d := range []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", t, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	for _, f := range []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/passwd",
		"/etc/group", "/etc/host.conf", "/etc/gai.conf", "/etc/services", "/etc/protocols", "/etc/ssl",
		"/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/pki", "/etc/ld.so.cache",
		"/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime", "/etc/timezone",
		"/etc/mime.types"} {
		if _, err := os.Stat(f); err == nil {
			args = append(args, "--ro-bind", f, f)
		}
	}
	return append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--new-session", "--bind", dir, dir, "--chdir", dir, "--clearenv", "--")
}

// Shell is the shell the executor runs commands with by default: bash when
// installed, else /bin/sh.
func Shell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

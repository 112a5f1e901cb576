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

// Bwrap is a bare bubblewrap command line with the namespaces the sandbox
// executor uses (all unshared but the network, capabilities dropped, a new
// session, /proc, /dev, a tmpfs /tmp, dir bound read-write at its own path),
// the rest of the host read-only, ready for the command to append.
func Bwrap(dir string) []string {
	return []string{"bwrap", "--unshare-all", "--share-net", "--die-with-parent", "--cap-drop", "ALL",
		"--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--new-session", "--bind", dir, dir, "--chdir", dir, "--"}
}

// Shell is the shell the executor runs commands with by default: bash when
// installed, else /bin/sh.
func Shell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

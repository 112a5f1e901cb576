// Package floor is what the daemon's work costs with none of the daemon: the
// baselines the benchmarks and bench/compare.sh measure next to it.
package floor

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"

	"github.com/agentbe/agentbe-daemon/sandbox"
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

// BwrapCmd is a command of the exec floor under bwrap: bubblewrap itself,
// with nothing of the daemon. Its argv is the sandbox package's
// (sandbox.BwrapArgv): the namespaces, mounts and environment of a command
// the executor starts in bwrap mode, the workspace bound from a descriptor
// passed as fd 3, as the executor does.
type BwrapCmd struct {
	path string
	args []string
	dir  *os.File // the workspace directory, the child's fd 3
}

// Bwrap is the floor command for argv in dir under the default sandbox
// configuration; Close it when done. It fails if bwrap is not installed.
func Bwrap(dir string, argv ...string) (*BwrapCmd, error) {
	path, args, err := sandbox.BwrapArgv(sandbox.Config{}, dir, argv...)
	if err != nil {
		return nil, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	return &BwrapCmd{path: path, args: args, dir: d}, nil
}

// Cmd returns a new exec.Cmd running the command, set up as the executor
// sets up bwrap: the directory as fd 3, an empty environment (bwrap sets
// the command's), its own session.
func (b *BwrapCmd) Cmd() *exec.Cmd {
	return &exec.Cmd{Path: b.path, Args: b.args, Env: []string{}, ExtraFiles: []*os.File{b.dir},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
}

// Args is the command's argv (argv[0] is "bwrap").
func (b *BwrapCmd) Args() []string { return b.args }

// Close releases the directory descriptor.
func (b *BwrapCmd) Close() error { return b.dir.Close() }

// Shell is the shell the executor runs commands with by default: bash when
// installed, else /bin/sh.
func Shell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

package client

import (
	"sort"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// MemoryOptions configure a Memory backend ("Memory Backend").
type MemoryOptions struct {
	// RootPrefix is the virtual root; "" means "/".
	RootPrefix string
	// Data pre-populates the store: keys are paths under the rules (relative
	// to the root), values the contents.
	Data map[string][]byte
	// Log is the operations log.
	Log LogOptions
	// DaemonBinary is the agent-backend binary MCPTransport spawns
	// (`--backend memory`); empty means "agent-backend" on PATH.
	DaemonBinary string
}

// Memory is an in-memory backend: keys are paths, directories are implicit
// (Mkdir is a no-op, Readdir lists the first segment after a prefix), Exec is
// NOT_IMPLEMENTED. It is the daemon's own memory workspace (fsops.NewMemory),
// so its path rules and errors are those of every other kind. Its status is
// connected until Destroy.
type Memory struct {
	*base
	opts MemoryOptions
}

// NewMemory builds the store and writes Data into it (in key order, so a
// failure is reported for the same key every time).
func NewMemory(opts MemoryOptions) (*Memory, error) {
	root := opts.RootPrefix
	if root == "" {
		root = "/"
	}
	ws := fsops.NewMemory(root, fsops.Options{})
	keys := make([]string, 0, len(opts.Data))
	for k := range opts.Data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := ws.WriteFile(k, opts.Data[k]); err != nil {
			ws.Close()
			return nil, err
		}
	}
	drv := &fsDriver{kindName: "memory", ws: ws, mcp: memoryMCP(opts.DaemonBinary)}
	drv.owner = ws.Close
	m := &Memory{opts: opts}
	m.base = newBase(drv, StatusConnected, nil, opts.Log)
	return m, nil
}

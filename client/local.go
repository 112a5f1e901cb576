package client

// LocalOptions configure a Local backend ("Filesystem Backend (Local)").
type LocalOptions struct {
	// Root is the workspace directory (required; it must exist). A relative
	// path is made absolute against the current directory.
	Root string
	// Isolation is the sandbox mode: "" or "auto" (bwrap when it works, else
	// landlock in a program whose main calls sandboxexec.Main, else
	// software), "bwrap" or "landlock" (an error if it cannot work here),
	// "software", "none".
	Isolation string
	// AllowDangerous turns the command safety policy off; it is on by default.
	AllowDangerous bool
	// MaxOutput caps each of stdout and stderr of Exec (head and tail kept,
	// with a notice giving the original length); 0 is the sandbox default.
	MaxOutput int64
	// Shell is "auto" (bash, else sh), "bash" or "sh".
	Shell string
	// Env applies to every command (per-scope and per-call Env merge over it).
	Env map[string]string
	// Log is the operations log.
	Log LogOptions
	// DaemonBinary is the agent-backend binary MCPTransport spawns; empty
	// means "agent-backend" on PATH. It runs outside the sandbox, so one
	// inside Root (where the agent could replace it) is refused.
	DaemonBinary string
}

// Local is a backend on this machine's file system: files through the
// daemon's fsops door, commands through its sandbox door, in this process.
// Its status is connected until Destroy. The sandbox is Linux only: on
// other systems NewLocal returns a NOT_IMPLEMENTED error
// (local_linux.go, local_other.go).
type Local struct {
	*base
	opts LocalOptions
}

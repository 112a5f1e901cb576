package daemon

import (
	"log/slog"
	"time"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/tools/extensions"
)

// SandboxConfig is the configuration cfg gives the executor of a workspace
// at root (its absolute, symlink-free path): the isolation mode and its
// floor, the shell, the command policy, the network (cfg.ExecNetworkOn), the
// per-command limits, the user commands run as, and secrets, the values no
// command's environment may carry. The daemon's workspace (startWorkspace)
// and `agent-backend extensions serve` build their executors from it, so a
// setting means the same in both.
func SandboxConfig(cfg config.Config, root string, secrets *clip.Secrets, log *slog.Logger) (sandbox.Config, error) {
	mode, err := sandbox.ParseMode(cfg.Isolation)
	if err != nil {
		return sandbox.Config{}, err
	}
	shell, err := sandbox.ParseShell(cfg.Shell)
	if err != nil {
		return sandbox.Config{}, err
	}
	netOn, _ := cfg.ExecNetworkOn()
	return sandbox.Config{
		Mode:          mode,
		MinMode:       sandbox.Mode(cfg.IsolationMin),
		Shell:         shell,
		WorkspaceRoot: root,
		NoNetwork:     !netOn,
		Policy:        sandbox.PolicyConfig{Disabled: !cfg.BlockDangerous, Allow: cfg.AllowCommands},
		MaxProcesses:  int64(cfg.ExecMaxProcesses),
		Rlimits: sandbox.Rlimits{
			FileSize:     cfg.ExecMaxFileSize,
			CPUSeconds:   int64(cfg.ExecMaxCPU / time.Second),
			AddressSpace: cfg.ExecMaxMemory,
		},
		MaxConcurrent:  cfg.ExecMaxConcurrent,
		DefaultTimeout: cfg.ExecTimeout,
		OutputLimit:    cfg.ExecOutputLimit,
		RunAs:          cfg.RunAs,
		Secrets:        secrets,
		Logger:         log,
	}, nil
}

// ExtensionsOptions are the extensions provider's options cfg gives: the
// directory, the network door's rules for http and postgres, the variables
// and database hosts the operator allows every extension, and secrets, the
// values env.get never returns. The caller adds the registry, workspace,
// executor and logger. The daemon (startExtensions) and `agent-backend
// extensions serve` start their providers from it.
func ExtensionsOptions(cfg config.Config, secrets *clip.Secrets) extensions.Options {
	return extensions.Options{Dir: cfg.Extensions,
		Net: netguard.New(cfg.NetGuard(80, 443)), PostgresNet: netguard.New(cfg.NetGuard(extensions.DefaultPostgresPort)),
		Secrets: secrets, EnvAllow: cfg.ExtensionsEnv, DBHosts: cfg.ExtensionsDBHosts}
}

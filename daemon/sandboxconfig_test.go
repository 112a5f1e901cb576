package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestSandboxConfig: every exec setting reaches the executor's
// configuration, the one the daemon's workspace and `extensions serve`
// both build their executors from.
func TestSandboxConfig(t *testing.T) {
	cfg := config.Default()
	cfg.Isolation, cfg.IsolationMin, cfg.Shell, cfg.RunAs = "software", "software", "sh", "nobody"
	cfg.BlockDangerous, cfg.AllowCommands = false, []string{"^rsync "}
	cfg.ExecMaxProcesses, cfg.ExecMaxFileSize, cfg.ExecMaxCPU, cfg.ExecMaxMemory = 7, 1<<20, 3*time.Second, 1<<30
	cfg.ExecMaxConcurrent, cfg.ExecTimeout, cfg.ExecOutputLimit = 5, 9*time.Second, 4096
	cfg.AuthToken, cfg.OperatorToken, cfg.ExecNetwork, cfg.LocalOnly = "tok", "op", "false", true
	secrets := clip.NewSecrets(cfg.Secrets()...)
	got, err := SandboxConfig(cfg, "/srv/ws", secrets, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := sandbox.Config{Mode: sandbox.ModeSoftware, MinMode: sandbox.ModeSoftware, Shell: sandbox.Shell("sh"), WorkspaceRoot: "/srv/ws",
		NoNetwork: true, Policy: sandbox.PolicyConfig{Disabled: true, Allow: []string{"^rsync "}}, MaxProcesses: 7,
		Rlimits: sandbox.Rlimits{FileSize: 1 << 20, CPUSeconds: 3, AddressSpace: 1 << 30}, MaxConcurrent: 5,
		DefaultTimeout: 9 * time.Second, OutputLimit: 4096, RunAs: "nobody", Secrets: secrets}
	if got.Mode != want.Mode || got.MinMode != want.MinMode || got.Shell != want.Shell || got.WorkspaceRoot != want.WorkspaceRoot ||
		got.NoNetwork != want.NoNetwork || got.Policy.Disabled != want.Policy.Disabled || !slices.Equal(got.Policy.Allow, want.Policy.Allow) ||
		got.MaxProcesses != want.MaxProcesses || got.Rlimits != want.Rlimits || got.MaxConcurrent != want.MaxConcurrent ||
		got.DefaultTimeout != want.DefaultTimeout || got.OutputLimit != want.OutputLimit || got.RunAs != want.RunAs ||
		got.Secrets != want.Secrets || !slices.Equal(got.Secrets.List(), []string{"tok", "op"}) {
		t.Errorf("SandboxConfig =\n%+v\nwant\n%+v", got, want)
	}
	// The network follows --exec-network as config resolves it: on for
	// stdio (no port) with auto.
	cfg.ExecNetwork = "auto"
	if got, _ := SandboxConfig(cfg, "/srv/ws", secrets, nil); got.NoNetwork {
		t.Error("auto without a port: commands lost the network")
	}
	cfg.Isolation = "vm"
	if _, err := SandboxConfig(cfg, "/srv/ws", secrets, nil); err == nil {
		t.Error("an unknown isolation mode was accepted")
	}
}

// TestExtensionsOptions: the operator's allowances for extensions reach
// the provider's options, and the daemon's list of secrets, which env.get
// never returns, is the provider's.
func TestExtensionsOptions(t *testing.T) {
	cfg := config.Default()
	cfg.Extensions, cfg.AuthToken, cfg.OperatorToken = "/srv/ext", "tok", "op"
	cfg.ExtensionsEnv, cfg.ExtensionsDBHosts = []string{"MY_API_KEY", "GH_*"}, []string{"db.internal"}
	secrets := clip.NewSecrets(cfg.Secrets()...)
	o := ExtensionsOptions(cfg, secrets)
	if o.Dir != "/srv/ext" || !slices.Equal(o.EnvAllow, cfg.ExtensionsEnv) || !slices.Equal(o.DBHosts, cfg.ExtensionsDBHosts) ||
		o.Secrets != secrets || o.Net == nil || o.PostgresNet == nil {
		t.Errorf("ExtensionsOptions = %+v", o)
	}
}

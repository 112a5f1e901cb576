package config

// A Group is a section of `agent-backend daemon --help` and of the table in
// docs/configuration.md: the settings a user looks for together. Every
// setting has one (TestEverySettingHasAGroup).
type Group string

// The groups, each named by what its flags decide.
const (
	// GroupServing: what is served, where and how (the workspace, the
	// address, TLS, stdio, MCP sessions, shutdown).
	GroupServing Group = "Serving"
	// GroupAuthentication: who may call (tokens, Origins).
	GroupAuthentication Group = "Authentication"
	// GroupIsolation: how commands are confined and judged.
	GroupIsolation Group = "Isolation"
	// GroupTools: the optional tool providers and their settings.
	GroupTools Group = "Tools"
	// GroupNetwork: what commands and the network door may reach.
	GroupNetwork Group = "Network"
	// GroupSSH: the SSH port, /ssh and their limits.
	GroupSSH Group = "SSH"
	// GroupObservability: logs and the audit log.
	GroupObservability Group = "Observability"
	// GroupLimits: the bounds on what a client can make the daemon hold
	// (time, sizes, connections, concurrency); their defaults fit most uses.
	GroupLimits Group = "Limits"
)

// groups is the order of the sections: the flags most users set first,
// the limits (the longest list, rarely changed) last.
var groups = []Group{GroupServing, GroupAuthentication, GroupIsolation, GroupTools,
	GroupNetwork, GroupSSH, GroupObservability, GroupLimits}

// Groups returns the groups in the order --help and docs/configuration.md
// show them.
func Groups() []Group { return append([]Group(nil), groups...) }

// GroupFlags returns the flags (the settings' keys) of g, in the order of
// the settings' declaration.
func GroupFlags(g Group) []string {
	var keys []string
	for _, s := range settings {
		if s.group == g {
			keys = append(keys, s.key)
		}
	}
	return keys
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// The reference daemon's (agent-backend 0.13.2) flags and commands this one
// does not take: each says what to use instead (docs/migrating.md), rather
// than "unknown flag".
var unsupportedFlags = map[string]string{
	"ssh-users": "this daemon creates no system users: it serves SSH itself (--ssh-listen ADDR:PORT with --ssh-authorized-keys FILE), and any user name logs in with an authorized key",
	"ssh-public-key": "put the key in an OpenSSH authorized_keys file and pass --ssh-authorized-keys FILE " +
		"(it is reloaded when it changes)",
}

// addUnsupportedFlags registers them, hidden, so parsing succeeds and
// checkUnsupportedFlags can explain.
func addUnsupportedFlags(cmd *cobra.Command) {
	for name := range unsupportedFlags {
		cmd.Flags().String(name, "", "")
		_ = cmd.Flags().MarkHidden(name)
	}
}

func checkUnsupportedFlags(cmd *cobra.Command) error {
	for name, instead := range unsupportedFlags {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s is a flag of the npm daemon that this one does not take: %s (see docs/migrating.md)", name, instead)
		}
	}
	return nil
}

// newDockerCommands are the reference's start-docker and stop-docker.
func newDockerCommands() []*cobra.Command {
	mk := func(name string) *cobra.Command {
		return &cobra.Command{
			Use:                name,
			Short:              "(the npm daemon's Docker helper; not provided: see docs/deploy.md)",
			Hidden:             true,
			DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error {
				return fmt.Errorf("%s is a command of the npm daemon that this one does not provide: it does not manage containers; "+
					"build and run the image yourself (docker build -f deploy/Dockerfile -t agent-backend . && "+
					"docker run -p 3001:3001 -v \"$PWD:/workspace\" agent-backend), see docs/deploy.md and docs/migrating.md", name)
			},
		}
	}
	return []*cobra.Command{mk("start-docker"), mk("stop-docker")}
}

package config

import (
	"fmt"
	"path/filepath"

	"github.com/agentbe/agentbe-daemon/internal/resolvepath"
)

// checkOperatorPaths refuses an operator path (a setting marked
// operatorPath, and the config file) that lies inside the workspace root
// once symlinks are followed, ".." included: the agent, through its file
// tools, SFTP or commands, could read it (a key, a token) or change it (a
// policy, an extension, the audit trail, the SSH port's keys) and so take
// the operator's privileges. A directory the daemon reads below (operatorDir)
// may not hold the workspace either. A file still to be created (the audit
// log, the host key) is judged by where it would be created. The memory
// backend has no workspace on disk: nothing to check.
//
// The tool site (--site) is served to every token, any file of it and not
// only its pages (GET /site/{path}), so no other operator path may lie
// inside it either, whatever the backend: the --site-env-file's secrets, a
// token file or a key there would be one request away.
func (c *Config) checkOperatorPaths() error {
	check := func(flag, p string, role pathRole) error {
		if c.Backend == "filesystem" {
			if err := c.checkOperatorPath(flag, p, role); err != nil {
				return err
			}
		}
		return c.checkOutsideSite(flag, p)
	}
	if err := check("--config", c.ConfigFile, operatorFile); err != nil {
		return err
	}
	for _, s := range settings {
		if s.operatorPath == notOperatorPath {
			continue
		}
		p, _ := s.field(c).(*string)
		if *p == "" || (s.used != nil && !s.used(c)) {
			continue
		}
		if err := check("--"+s.key, *p, s.operatorPath); err != nil {
			return err
		}
	}
	return nil
}

// checkOutsideSite refuses an operator path other than --site itself that
// lies inside the tool site once symlinks are followed.
func (c *Config) checkOutsideSite(flag, p string) error {
	if flag == "--site" {
		return nil
	}
	return Outside(flag, p, "the tool site --site", c.Site,
		"every file of which an agent can read (GET /site/...); keep operator files outside the site")
}

// Outside is the one rule that keeps an operator's path out of a place
// another party reads: it refuses p, the value of flag, when p lies
// inside area (named areaName in the error: "the workspace --root")
// once symlinks and ".." are followed, a bind mount of area itself
// included, and when that cannot be told; why ends the error (what the
// party there could do, and what to do instead). A p that does not exist
// yet is judged by where it would be created. Validate applies it to the
// workspace and to the tool site; agent-backend site serve to its DIR.
func Outside(flag, p, areaName, area, why string) error {
	if p == "" || area == "" {
		return nil
	}
	inside, err := resolvepath.Within(area, p)
	if err != nil {
		return fmt.Errorf("%s %s: cannot tell whether it lies outside %s %s: %v", flag, p, areaName, area, err)
	}
	if inside {
		return fmt.Errorf("%s %s%s lies inside %s %s, %s", flag, p, resolvedNote(p), areaName, area, why)
	}
	return nil
}

func (c *Config) checkOperatorPath(flag, p string, role pathRole) error {
	if p == "" {
		return nil
	}
	if err := Outside(flag, p, "the workspace --root", c.Root,
		"where the agent can read and change it; keep operator files outside the workspace"); err != nil {
		return err
	}
	if role == operatorDir {
		holds, err := resolvepath.Within(p, c.Root)
		if err != nil {
			return fmt.Errorf("%s %s: cannot tell whether it holds the workspace --root %s: %v", flag, p, c.Root, err)
		}
		if holds {
			return fmt.Errorf("%s %s%s holds the workspace --root %s, where the agent can add and change files the daemon would read there; keep operator directories apart from the workspace",
				flag, p, resolvedNote(p), c.Root)
		}
	}
	return nil
}

// resolvedNote says where p leads when symlinks or ".." make that another
// place than it reads.
func resolvedNote(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return ""
	}
	if r, err := resolvepath.Resolve(p); err == nil && r != abs {
		return " (which leads to " + r + ")"
	}
	return ""
}

// servesSSH reports whether the daemon serves SSH, and so uses its host
// key (--ssh-host-key): over WebSocket at /ssh, or on --ssh-listen.
func (c *Config) servesSSH() bool {
	return !c.LocalOnly && (!c.DisableSSHWS || c.SSHListen != "" || c.ConventionalSSH)
}

// auditLogIsFile reports whether --audit-log names a file ("-" is stderr).
func auditLogIsFile(c *Config) bool { return c.AuditLog != "-" }

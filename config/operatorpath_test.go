package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// operatorPathFixtures makes, at p, what each operator path flag names when
// it is valid (so that a path outside the workspace passes Validate), and
// sets the settings it needs besides (--tls-key with --tls-cert, --site with
// --site-env-file) to valid values in dir, outside the workspace. Every
// setting marked operatorPath has one: TestOperatorPathsOutsideWorkspace
// runs its rows over each.
var operatorPathFixtures = map[string]func(t *testing.T, c *Config, p, dir string){
	"--config": fileFixture("root: /not/read/by/Validate\n"),
	"tls-cert": func(t *testing.T, c *Config, p, dir string) {
		mkfile(t, p, "x")
		c.TLSKey = mkfile(t, filepath.Join(dir, "key.pem"), "x")
	},
	"tls-key": func(t *testing.T, c *Config, p, dir string) {
		mkfile(t, p, "x")
		c.TLSCert = mkfile(t, filepath.Join(dir, "cert.pem"), "x")
	},
	"auth-token-file":          fileFixture("agent-token\n"),
	"tokens":                   fileFixture(`{"tokens":[]}`),
	"audit-log":                func(*testing.T, *Config, string, string) {}, // created by the daemon
	"upstreams":                fileFixture(`{"servers":[]}`),
	"upstream-cache-dir":       func(*testing.T, *Config, string, string) {}, // created by the daemon
	"ssh-authorized-keys":      fileFixture(""),
	"ssh-trusted-user-ca-keys": fileFixture(""),
	"ssh-password-hash-file":   fileFixture(""),
	"browser-path":             fileFixture("#!/bin/sh\n"),
	"sandbox-helper":           fileFixture("\x7fELF"), // checked as a program by the daemon, not Validate
	"exec-approvals":           fileFixture(`{}`),
	"operator-token-file":      fileFixture("operator-token\n"),
	"metrics-token-file":       fileFixture("metrics-token\n"),
	"extensions":               func(t *testing.T, c *Config, p, dir string) { mkdir(t, p) },
	"site": func(t *testing.T, c *Config, p, dir string) {
		mkdir(t, p)
		mkfile(t, filepath.Join(p, "README.md"), "# site\n")
	},
	"site-env-file": func(t *testing.T, c *Config, p, dir string) {
		mkfile(t, p, "A=b\n")
		c.Site = filepath.Join(dir, "the-site")
		mkdir(t, c.Site)
		mkfile(t, filepath.Join(c.Site, "README.md"), "# site\n")
	},
	"ssh-host-key": func(*testing.T, *Config, string, string) {}, // created by the daemon
	"state-dir":    func(*testing.T, *Config, string, string) {}, // created by the daemon
}

// operatorDirs are the operator path flags that name a directory the daemon
// reads below (extensions, a site's pages, the upstreams' caches): one that
// holds the workspace is refused too.
var operatorDirs = map[string]bool{"extensions": true, "site": true, "upstream-cache-dir": true, "state-dir": true}

func fileFixture(content string) func(t *testing.T, c *Config, p, dir string) {
	return func(t *testing.T, _ *Config, p, _ string) { mkfile(t, p, content) }
}

func mkfile(t *testing.T, p, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

// setOperatorPath sets the flag key (a setting, or --config) of c to p.
func setOperatorPath(t *testing.T, c *Config, key, p string) {
	t.Helper()
	if key == "--config" {
		c.ConfigFile = p
		return
	}
	s := lookupSetting(key)
	if s == nil {
		t.Fatalf("no setting %q", key)
	}
	if err := s.set(c, p); err != nil {
		t.Fatalf("set %s: %v", key, err)
	}
}

// TestOperatorPathsOutsideWorkspace: every operator path flag (the
// operator's own files and directories: keys, tokens, policies, extensions,
// the audit log, the config file) must lie outside the workspace --root,
// where the agent could read and change it: a path inside, the root itself,
// one that climbs back in with "..", one through a symlink (of a directory
// or of the file itself) that leads in, and a directory the workspace is
// in, are refused by Validate with an error naming the flag, the path and
// the root; the same file outside is accepted.
func TestOperatorPathsOutsideWorkspace(t *testing.T) {
	keys := []string{"--config"}
	for _, s := range settings {
		if _, ok := operatorPathFixtures[s.key]; ok {
			keys = append(keys, s.key)
		}
	}
	if len(keys) != len(operatorPathFixtures) {
		t.Fatalf("operatorPathFixtures names %d flags, the settings table %d of them (and --config): a row names no setting", len(operatorPathFixtures), len(keys))
	}
	for _, key := range keys {
		flag := key
		if !strings.HasPrefix(flag, "--") {
			flag = "--" + key
		}
		t.Run(key, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				// path returns the flag's value, given the workspace
				// root, a directory outside it and their parent.
				path func(root, outside, base string) string
				// link: p is a symlink to the workspace's x, which the
				// fixture makes (the agent's file, the operator's name).
				link, refused bool
			}{
				{"outside", func(_, o, _ string) string { return filepath.Join(o, "x") }, false, false},
				{"outside, beside a root of the same prefix", func(_, _, b string) string { return filepath.Join(b, "ws2", "x") }, false, false},
				{"inside", func(r, _, _ string) string { return filepath.Join(r, "x") }, false, true},
				{"deep inside, not made yet", func(r, _, _ string) string { return filepath.Join(r, "a", "b", "x") }, false, true},
				{"the root itself", func(r, _, _ string) string { return r }, false, true},
				{"inside through ..", func(_, o, _ string) string { return filepath.Join(o, "..", "ws", "x") }, false, true},
				{"through a symlinked directory outside that leads in", func(_, _, b string) string { return filepath.Join(b, "link-to-ws", "x") }, false, true},
				{"a symlink outside to a file inside", func(_, o, _ string) string { return filepath.Join(o, "link-to-x") }, true, true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					base := t.TempDir()
					root, outside := filepath.Join(base, "ws"), filepath.Join(base, "outside")
					mkdir(t, root)
					mkdir(t, outside)
					mkdir(t, filepath.Join(base, "ws2"))
					if err := os.Symlink(root, filepath.Join(base, "link-to-ws")); err != nil {
						t.Fatal(err)
					}
					c := Default()
					c.Root = root
					c.SSHHostKey = filepath.Join(outside, "host-key")
					p := tc.path(root, outside, base)
					switch {
					case tc.link:
						// For the flags whose file the daemon creates,
						// the link dangles until the daemon follows it.
						operatorPathFixtures[key](t, &c, filepath.Join(root, "x"), outside)
						if err := os.Symlink(filepath.Join(root, "x"), p); err != nil {
							t.Fatal(err)
						}
					case p != root:
						operatorPathFixtures[key](t, &c, p, outside)
					}
					setOperatorPath(t, &c, key, p)
					err := c.Validate()
					if !tc.refused {
						if err != nil {
							t.Fatalf("%s %s (outside the workspace): %v", flag, p, err)
						}
						return
					}
					if err == nil {
						t.Fatalf("%s %s lies inside the workspace %s and was accepted", flag, p, root)
					}
					for _, want := range []string{flag + " " + p, "inside the workspace --root " + root, "keep operator files outside the workspace"} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("error %q lacks %q", err, want)
						}
					}
				})
			}
			if !operatorDirs[key] {
				return
			}
			// A directory the daemon reads below must not hold the
			// workspace either: the agent's files would be in it.
			base := t.TempDir()
			root := filepath.Join(base, "ws")
			mkdir(t, root)
			c := Default()
			c.Root = root
			c.SSHHostKey = filepath.Join(t.TempDir(), "host-key")
			operatorPathFixtures[key](t, &c, base, t.TempDir())
			setOperatorPath(t, &c, key, base)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), flag+" "+base) || !strings.Contains(err.Error(), "holds the workspace --root "+root) {
				t.Errorf("%s %s, the workspace's parent: %v; want a refusal naming the flag and the root", flag, base, err)
			}
		})
	}
}

// notOperatorPaths are the settings whose value is text (a string or a
// list) and yet not an operator path, each with the reason. Every other
// such setting must be marked operatorPath in the settings table.
var notOperatorPaths = map[string]string{
	// The workspace itself, and a directory inside it by design.
	"root":       "the workspace the rule keeps operator paths out of",
	"scope-path": "a directory of the workspace, relative to the root",
	// Words from a fixed list, or a number.
	"backend":            "filesystem or memory",
	"isolation":          "a mode name",
	"isolation-min":      "a mode name",
	"shell":              "auto, bash or sh: found on the system's PATH, never a path given here",
	"exec-network":       "auto, true or false",
	"exec-approval-mode": "deny, allowlist or full",
	"exec-ask":           "off, on-miss or always",
	"checkpoints":        "off, manual or auto (the store lies under --state-dir, which is checked)",
	"log-format":         "text or json",
	"log-level":          "a level name",
	"max-procs":          "auto or a number",
	// Names, addresses and patterns.
	"run-as":              "a user name",
	"browser-run-as":      "a user name",
	"bind":                "an address",
	"ssh-listen":          "an address",
	"auth-token":          "the token itself (its file is --auth-token-file)",
	"allow-commands":      "regular expressions",
	"allowed-origins":     "browser origins",
	"net-allow-hosts":     "host names",
	"net-allow-cidrs":     "address prefixes",
	"net-allow-ports":     "port numbers",
	"extensions-env":      "variable names",
	"extensions-db-hosts": "host names",
	"ssh-cert-principals": "login names",
	"ssh-env-allowlist":   "environment variable names",
}

// TestEveryPathSettingIsClassified: every setting whose value is text is
// either an operator path (marked in the settings table, so Validate keeps
// it out of the workspace) or listed in notOperatorPaths with the reason;
// a new path flag that forgot operatorPath fails here. Every operator path
// has a row in TestOperatorPathsOutsideWorkspace's fixtures, and the
// directories among them are the ones that may not hold the workspace.
func TestEveryPathSettingIsClassified(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range settings {
		seen[s.key] = true
		kind := s.kind()
		_, exempt := notOperatorPaths[s.key]
		switch {
		case s.operatorPath != notOperatorPath && kind != "string":
			t.Errorf("%s is marked operatorPath but its value is a %s, not a path", s.key, kind)
		case s.operatorPath != notOperatorPath && exempt:
			t.Errorf("%s is marked operatorPath and listed in notOperatorPaths: drop one", s.key)
		case s.operatorPath == notOperatorPath && (kind == "string" || kind == "list") && !exempt:
			t.Errorf("%s takes text but is neither marked operatorPath in the settings table nor listed in notOperatorPaths with the reason it is not an operator's path", s.key)
		}
		if s.operatorPath == notOperatorPath && s.used != nil {
			t.Errorf("%s has used but is no operator path", s.key)
		}
		if s.operatorPath == notOperatorPath {
			continue
		}
		if _, ok := operatorPathFixtures[s.key]; !ok {
			t.Errorf("operator path %s has no row in operatorPathFixtures: TestOperatorPathsOutsideWorkspace does not cover it", s.key)
		}
		if (s.operatorPath == operatorDir) != operatorDirs[s.key] {
			t.Errorf("%s: operatorDir in the settings table is %v, in operatorDirs %v", s.key, s.operatorPath == operatorDir, operatorDirs[s.key])
		}
	}
	for key := range notOperatorPaths {
		if !seen[key] {
			t.Errorf("notOperatorPaths lists %s, which is no setting", key)
		}
	}
}

// TestUnusedHostKeyNotChecked: the host key's default lies in the user's
// state directory, inside a workspace that is the home directory; a daemon
// that serves no SSH never creates it and starts, one that serves SSH is
// refused.
func TestUnusedHostKeyNotChecked(t *testing.T) {
	home := t.TempDir()
	c := Default()
	c.Root = home
	c.SSHHostKey = defaultHostKey(1000, func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	})
	c.LocalOnly = true
	if err := c.Validate(); err != nil {
		t.Errorf("--local-only, --root the home directory: %v", err)
	}
	c.LocalOnly = false
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--ssh-host-key "+c.SSHHostKey+" lies inside the workspace") {
		t.Errorf("serving /ssh with the host key in the workspace: %v", err)
	}
	c.DisableSSHWS = true
	if err := c.Validate(); err != nil {
		t.Errorf("--disable-ssh-ws, no --ssh-listen: %v", err)
	}
	c.AuditLog = "-"
	if err := c.Validate(); err != nil {
		t.Errorf("--audit-log - (stderr): %v", err)
	}
}

// TestMemoryBackendHasNoWorkspaceOnDisk: with --backend memory the root is
// a name, not a directory the agent can reach: operator paths below it are
// not refused.
func TestMemoryBackendHasNoWorkspaceOnDisk(t *testing.T) {
	root := t.TempDir()
	c := Default()
	c.Root, c.Backend = root, "memory"
	c.SSHHostKey = filepath.Join(t.TempDir(), "key")
	c.OperatorTokenFile = mkfile(t, filepath.Join(root, "op-token"), "x")
	if err := c.Validate(); err != nil {
		t.Errorf("memory backend: %v", err)
	}
}

// TestOperatorPathsOutsideSite: the tool site (--site) is served to every
// token (GET /site/{path} answers any file of it, not only pages), so an
// operator path inside it would hand the agent the operator's file: the
// --site-env-file's secrets, a token file, a key. Every operator path flag
// (and the config file) set to a file inside the site, directly or through
// a symlink outside that leads in, is refused naming the flag and the site;
// the same file outside both the site and the workspace is accepted.
func TestOperatorPathsOutsideSite(t *testing.T) {
	keys := []string{"--config"}
	for _, s := range settings {
		if _, ok := operatorPathFixtures[s.key]; ok && s.key != "site" {
			keys = append(keys, s.key)
		}
	}
	for _, key := range keys {
		flag := key
		if !strings.HasPrefix(flag, "--") {
			flag = "--" + key
		}
		for _, tc := range []struct {
			name    string
			link    bool // p is a symlink outside to the site's x
			inside  bool
			refused bool
		}{
			{"outside", false, false, false},
			{"inside the site", false, true, true},
			{"a symlink outside to a file inside the site", true, true, true},
		} {
			t.Run(key+"/"+tc.name, func(t *testing.T) {
				base := t.TempDir()
				root, outside, site := filepath.Join(base, "ws"), filepath.Join(base, "outside"), filepath.Join(base, "site")
				mkdir(t, root)
				mkdir(t, outside)
				c := Default()
				c.Root = root
				c.SSHHostKey = filepath.Join(outside, "host-key")
				p := filepath.Join(outside, "x")
				if tc.inside && !tc.link {
					p = filepath.Join(site, "x")
				}
				target := p
				if tc.link {
					target = filepath.Join(site, "x")
				}
				operatorPathFixtures[key](t, &c, target, outside)
				if tc.link {
					if err := os.Symlink(target, p); err != nil {
						t.Fatal(err)
					}
				}
				// The site the fixture may have set (--site-env-file's)
				// gives way to the one under test.
				c.Site = site
				mkdir(t, site)
				mkfile(t, filepath.Join(site, "README.md"), "# site\n")
				setOperatorPath(t, &c, key, p)
				err := c.Validate()
				if !tc.refused {
					if err != nil {
						t.Fatalf("%s %s (outside the site %s): %v", flag, p, site, err)
					}
					return
				}
				if err == nil {
					t.Fatalf("%s %s lies inside the tool site %s, which the agent reads, and was accepted", flag, p, site)
				}
				for _, want := range []string{flag + " " + p, "inside the tool site --site " + site} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
			})
		}
	}
}

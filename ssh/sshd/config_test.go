package sshd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/srcscan"
	"github.com/agentbe/agentbe-daemon/internal/sshtest"
	"github.com/agentbe/agentbe-daemon/ssh/sftpd"
)

// TestConfigDefaults: NewConfig refuses a Config without a workspace or a
// host key, fills every zero value once (the pools included), and every
// Server made from it shares that one Config, whatever its Transport.
func TestConfigDefaults(t *testing.T) {
	ws := fsops.NewMemory("/mem", fsops.Options{})
	defer ws.Close()
	if _, err := NewConfig(Config{HostKey: sshtest.HostKey(t)}); err == nil {
		t.Error("NewConfig without a workspace succeeded")
	}
	if _, err := NewConfig(Config{Workspace: ws}); err == nil {
		t.Error("NewConfig without a host key succeeded")
	}
	if _, err := (&Config{Workspace: ws, HostKey: sshtest.HostKey(t)}).Server(Transport{}); err == nil {
		t.Error("Server of a Config NewConfig did not make succeeded")
	}
	c, err := NewConfig(Config{Workspace: ws, HostKey: sshtest.HostKey(t), EnvAllowlist: []string{"LANG", "LC_*"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxConns != DefaultMaxConns || c.LoginTimeout != DefaultLoginTimeout || c.MaxChannels != DefaultMaxChannels ||
		c.Channels == nil || c.SFTP.MaxHandles != sftpd.DefaultMaxHandles || c.SFTP.ConnOps != sftpd.DefaultConnOps ||
		cap(c.SFTP.ServerOps) != sftpd.DefaultServerOps || c.SFTP.ServerHandles == nil || c.SFTP.ServerListed == nil || c.Logger == nil {
		t.Errorf("defaults not filled: %+v", c)
	}
	port, err := c.Server(Transport{KeepaliveInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ws2, err := c.Server(Transport{NoClientAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	defer ws2.Close()
	if port.cfg != c || ws2.cfg != c {
		t.Error("a Server does not serve the Config it was made from")
	}
	if port.keepalive != time.Second || ws2.keepalive != 0 || port.sshConf.NoClientAuth || !ws2.sshConf.NoClientAuth {
		t.Error("a Server does not take its Transport's authentication and keepalive")
	}
	for _, s := range []*Server{port, ws2} {
		if !s.envAllowed("LANG") || !s.envAllowed("LC_ALL") || s.envAllowed("PATH") {
			t.Error("the env allowlist differs from the Config's")
		}
	}
}

// TestSSHConfigHasOneHome: the daemon's SSH configuration is made in one
// place, so its listeners cannot drift apart. Outside this package, one
// non-test file calls NewConfig (the daemon's composition root, which then
// hands the Config to both listeners), one loads the host key, and none
// builds an x/crypto ServerConfig (a second SSH server beside the core);
// inside it, Config.Server alone makes a Server and an x/crypto
// ServerConfig.
func TestSSHConfigHasOneHome(t *testing.T) {
	const self = "github.com/agentbe/agentbe-daemon/ssh/sshd"
	const xssh = "golang.org/x/crypto/ssh"
	calls := map[string][]string{} // "NewConfig", "LoadOrCreateHostKey": files
	srcscan.OtherFiles(t, "../..", func(rel string, fset *token.FileSet, f *ast.File) {
		sshd, crypto := importName(f, self, "sshd"), importName(f, xssh, "ssh")
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sshd != "" && isIdent(sel.X, sshd) {
					if name := sel.Sel.Name; name == "NewConfig" || name == "LoadOrCreateHostKey" {
						calls[name] = append(calls[name], fset.Position(n.Pos()).String())
					}
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && crypto != "" && isIdent(sel.X, crypto) && sel.Sel.Name == "ServerConfig" {
					t.Errorf("%s: an x/crypto ServerConfig outside sshd: serve SSH through sshd.Config.Server", fset.Position(n.Pos()))
				}
			}
			return true
		})
	})
	for _, name := range []string{"NewConfig", "LoadOrCreateHostKey"} {
		if len(calls[name]) != 1 {
			t.Errorf("sshd.%s is called at %d places outside sshd, want 1 (the daemon's, for every listener): %s",
				name, len(calls[name]), strings.Join(calls[name], ", "))
		}
	}

	// Inside the package: only config.go makes a Server or a ServerConfig.
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") || path == "config.go" {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		crypto := importName(f, xssh, "ssh")
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if isIdent(lit.Type, "Server") {
				t.Errorf("%s: a Server made outside Config.Server", fset.Position(lit.Pos()))
			}
			if sel, ok := lit.Type.(*ast.SelectorExpr); ok && isIdent(sel.X, crypto) && sel.Sel.Name == "ServerConfig" {
				t.Errorf("%s: an x/crypto ServerConfig made outside Config.Server", fset.Position(lit.Pos()))
			}
			return true
		})
	}
}

// importName is the name f refers to the package at path by ("" when it
// does not import it); def is the package's own name.
func importName(f *ast.File, path, def string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == path {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return def
		}
	}
	return ""
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

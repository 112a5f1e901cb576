package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
)

// Preflight checks what --check-config can check of the machine without
// starting: that the bind address resolves, that this user can bind the
// port (and that nothing else holds it), the same for the SSH port, and
// that the SSH host key can be read, or created in its directory. Each
// problem is one error naming the flag. (The files the daemon's parts
// load, the SSH port's authentication files among them, are daemon.Check's.)
func (c Config) Preflight() []error {
	var errs []error
	if !c.LocalOnly {
		if net.ParseIP(c.Bind) == nil {
			if _, err := net.LookupHost(c.Bind); err != nil {
				errs = append(errs, fmt.Errorf("--bind %s does not resolve: %v", c.Bind, err))
			}
		}
		if len(errs) == 0 {
			ln, err := net.Listen("tcp", c.Addr())
			if err == nil {
				ln.Close()
			} else {
				errs = append(errs, c.PortListenError(err))
			}
		}
	}
	if c.SSHListen != "" {
		ln, err := net.Listen("tcp", c.SSHListen)
		if err == nil {
			ln.Close()
		} else {
			errs = append(errs, ListenError("--ssh-listen", c.SSHListen, err))
		}
	}
	if c.servesSSH() && c.SSHHostKey != "" {
		_, statErr := os.Stat(c.SSHHostKey)
		if err := statErr; err == nil {
			// Without blocking: a FIFO under the name would hold
			// --check-config forever (daemon.Check then refuses it).
			if f, err := os.OpenFile(c.SSHHostKey, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0); err != nil {
				errs = append(errs, fmt.Errorf("--ssh-host-key %s cannot be read: %v", c.SSHHostKey, err))
			} else {
				f.Close()
			}
		} else if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			// The daemon creates the missing directories (0700) and the
			// key: the deepest existing one must be writable.
			dir := filepath.Dir(c.SSHHostKey)
			for {
				if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
					break
				}
				dir = filepath.Dir(dir)
			}
			probe, err := os.CreateTemp(dir, ".agentbe-check-*")
			if err != nil {
				errs = append(errs, fmt.Errorf("--ssh-host-key %s does not exist and cannot be created in %s: %v", c.SSHHostKey, dir, err))
			} else {
				probe.Close()
				os.Remove(probe.Name())
			}
		} else {
			errs = append(errs, fmt.Errorf("--ssh-host-key %s: %v", c.SSHHostKey, statErr))
		}
	}
	return errs
}

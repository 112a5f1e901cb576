package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
)

// ListenError words a failure to bind a listening address as one line that
// names the flag, the address and why: "is in use" (EADDRINUSE), "needs
// root or CAP_NET_BIND_SERVICE" (EACCES on a port below 1024), "is not an
// address of this machine" (EADDRNOTAVAIL). flag is how the user gave it:
// "--port 3001" or "--ssh-listen 127.0.0.1:2222". It is the one wording of
// the daemon's start (daemon.Listen) and of --check-config (Preflight).
func ListenError(flag, addr string, err error) error {
	var why string
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		why = "is in use: another process listens there; stop it or choose another port"
	case errors.Is(err, os.ErrPermission):
		why = "needs root or CAP_NET_BIND_SERVICE (a port below 1024); choose a port from 1024 up, or grant the capability (setcap cap_net_bind_service=+ep, or AmbientCapabilities= in a systemd unit)"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		why = "is not an address of this machine; bind one of its addresses, 127.0.0.1 or 0.0.0.0"
	default:
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			err = oe.Err
		}
		return fmt.Errorf("%s: cannot listen on %s: %v", flag, addr, err)
	}
	return fmt.Errorf("%s: %s %s", flag, addr, why)
}

// PortListenError is ListenError for --bind:--port: it names --port, or
// --bind when the address is not the machine's.
func (c Config) PortListenError(err error) error {
	flag := fmt.Sprintf("--port %d", c.Port)
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		flag = "--bind " + c.Bind
	}
	return ListenError(flag, c.Addr(), err)
}

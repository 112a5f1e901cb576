package daemon

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"
)

// Notifier speaks systemd's sd_notify protocol: datagrams such as "READY=1"
// sent to the unix socket named by $NOTIFY_SOCKET. With Type=notify, systemd
// considers the service started only once READY=1 arrives, so dependants
// start when the port really accepts connections.
type Notifier struct {
	socket   string
	watchdog time.Duration // 0 = no watchdog
}

// NotifierFromEnv returns a Notifier for $NOTIFY_SOCKET, or nil when the
// daemon is not run by systemd with Type=notify. $WATCHDOG_USEC enables
// watchdog pings (only if $WATCHDOG_PID is unset or is this process).
func NotifierFromEnv(getenv func(string) string, pid int) *Notifier {
	socket := getenv("NOTIFY_SOCKET")
	if socket == "" {
		return nil
	}
	n := &Notifier{socket: socket}
	if usec, err := strconv.ParseInt(getenv("WATCHDOG_USEC"), 10, 64); err == nil && usec > 0 {
		if wp := getenv("WATCHDOG_PID"); wp == "" || wp == strconv.Itoa(pid) {
			n.watchdog = time.Duration(usec) * time.Microsecond
		}
	}
	return n
}

// Notify sends one state message (lines of KEY=VALUE). A nil Notifier does
// nothing. A leading "@" names a socket in the abstract namespace; Go's net
// package maps it to the leading NUL byte the kernel expects.
func (n *Notifier) Notify(state string) error {
	if n == nil {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.socket, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("sd_notify %s: %w", n.socket, err)
	}
	return nil
}

// runWatchdog sends WATCHDOG=1 at half the watchdog interval, as systemd
// recommends, until ctx is done.
func (n *Notifier) runWatchdog(ctx context.Context, onErr func(error)) {
	if n == nil || n.watchdog <= 0 {
		return
	}
	t := time.NewTicker(n.watchdog / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := n.Notify("WATCHDOG=1"); err != nil {
				onErr(err)
			}
		}
	}
}

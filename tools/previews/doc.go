// Package previews lets an authorized client reach a server that a
// workspace process listens on, without opening its port to the world
// (--previews, docs/processes.md). It is the one place that decides which
// ports those are, for both faces that use it: SSH direct-tcpip channels
// (`ssh -L`, served by sshd through Options.Forward) and the HTTP reverse
// proxy at /preview/{port}/ (Proxy, mounted by the daemon behind its token);
// and Reachable is the rule of the loopback judge the daemon gives the
// browser and the tool calls that connect to this machine (daemon/tools.go).
//
// A port is the workspace's when a process that sandbox.WorkspaceProcesses
// counts (a command the executor runs now, or a descendant of one) holds a
// listening TCP socket on it: the sockets in state LISTEN of that process's
// network namespace (/proc/PID/net/tcp and tcp6, read by
// procnet.ListenersOf) whose inode appears among the process's descriptors
// (/proc/PID/fd, "socket:[inode]"). A process whose main thread has ended
// while its other threads run shows none of these under /proc/PID, so it
// is read through one of its threads (/proc/PID/task). Nothing else is
// reachable: not the daemon's own port, not another host service on
// loopback. A caller confined to a scope reaches only the ports of
// commands started within that scope (their boundary lies in it).
//
// Reachable fails closed: where the daemon's socket table cannot be read
// whole, or a listener on the port is held by no workspace process read
// while one could not be read (which namespace it is in, its
// descriptors), whose the port is cannot be told, and it refuses
// (ErrUnjudged) and logs a warning.
// A process that ended meanwhile holds nothing and is no failure: by
// sandbox.WorkspaceProcesses's rule, a child it left behind has left its
// command's tree. A listing (Ports, the /preview/ index) and Dial leave out
// what they cannot read, and log it: a port left out is a port refused.
//
// Under bwrap isolation a command has its own network namespace, so its
// loopback is not the host's: Dial opens /proc/PID/ns/net of the process
// holding the socket, checks that it is still the namespace it judged, and
// connects from a goroutine locked to an OS thread that entered it with
// setns(2). That thread is never unlocked, so Go ends it with the
// goroutine instead of handing a thread in the sandbox's namespace to other
// goroutines. Entering a namespace needs CAP_SYS_ADMIN; without it Dial
// says so. Under software and landlock isolation the process shares the
// daemon's namespace and Dial connects directly.
//
// Limits, stated plainly: the port is judged when a connection is opened,
// not for each byte. In the daemon's own namespace (software, landlock) a
// workspace process that closes its socket between the judgement and the
// connect, while another host process binds the same port in that instant,
// would get that process's connection; a pid that ends and is reused in the
// microseconds between listing the workspace's processes and reading its
// descriptors is judged as the new process. A namespace is only entered
// after checking its identity (the inode of the opened descriptor). When
// commands in different namespaces (two bwrap commands) listen on the same
// port, one of them is reached.
//
// Every connection counts against Options.MaxConns until it is closed (an
// idle pooled connection of the HTTP proxy included: it is dropped to make
// room); one more is refused with ErrBusy. Options.Opened hears of every
// connection opened or refused (the daemon's audit log).
package previews

package sshd

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// ExitCannotExecute is the exit status of a command that never ran (blocked
// by the safety policy, empty, or no executor): 126, a shell's "cannot
// execute". "Not found" (127) comes from the shell itself.
const ExitCannotExecute = 126

const exitCannotExecute = ExitCannotExecute

// MaxSessionEnv and MaxSessionEnvBytes bound what a session's env requests
// may set: at most 128 variables (OpenSSH's sshd ignores more) and 64 KiB
// of names and values together. The allowlist admits whole families of
// names (LC_*), and each request may carry up to x/crypto's 256 KiB
// packet, so without them a client could make a session hold as much
// memory as it cared to send. A request past either bound is refused;
// setting a name again replaces its value.
const (
	MaxSessionEnv      = 128
	MaxSessionEnvBytes = 64 << 10
)

// session is one "session" channel: at most one exec, shell or subsystem,
// preceded by any number of env and pty-req requests, followed by signal and
// window-change requests.
type session struct {
	srv    *Server
	ctx    context.Context // the connection's: ends when it does
	remote string          // the client's address, for logs
	ch     gossh.Channel
	pre    *preread // reads the channel's data until a command or subsystem takes it
	env    map[string]string
	envLen int // bytes of env's names and values, for MaxSessionEnvBytes
	pty    *sandbox.Pty
	busy   bool      // an exec, shell or subsystem has been accepted
	conn   *Conn     // the connection
	slot   *slot     // its place in the connection's channel count
	sub    Subsystem // the subsystem, once one started

	// For Config.SessionEnded: what ran, since when, and the bytes
	// counted by the counting wrappers (set only when the hook is).
	kind, command string
	started       time.Time
	refused       bool
	bytesIn       atomic.Int64
	bytesOut      atomic.Int64

	mu     sync.Mutex
	proc   sandbox.Process    // nil until started, for signals and resizes
	cancel context.CancelFunc // ends the command's context: the executor kills its whole tree
	done   chan struct{}      // closed when the command or subsystem finished
}

// openSession accepts a "session" channel and runs its request loop on a
// goroutine of its own; commands and SFTP run on further goroutines so that
// signal and window-change requests are served while they run. The slot
// is released when the session is over (or was refused).
func (s *Server) openSession(ctx context.Context, conn *Conn, nc gossh.NewChannel, sl *slot) {
	ss := &session{srv: s, ctx: ctx, remote: conn.remote, conn: conn, slot: sl, done: make(chan struct{})}
	if !s.goTracked(func() {
		defer sl.release()
		ch, reqs, err := nc.Accept()
		if err != nil {
			return
		}
		ss.ch, ss.pre = ch, newPreread(ch)
		go ss.pre.run()
		ss.serve(reqs)
	}) {
		sl.release()
		_ = nc.Reject(gossh.ResourceShortage, ErrShuttingDown.Error())
	}
}

func (ss *session) serve(reqs <-chan *gossh.Request) {
	early := ss.pre.done // the pre-reader stopped: maybe data before any request
loop:
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				break loop
			}
			ss.reply(req)
		case <-early:
			early = nil
			if ss.busy || !ss.pre.overflowed() {
				continue
			}
			// x/crypto queues a channel's requests before it delivers the
			// data that follows them, so the requests the client sent
			// before this data are queued now: serve those first.
			for n := len(reqs); n > 0 && !ss.busy; n-- {
				req, ok := <-reqs
				if !ok {
					break
				}
				ss.reply(req)
			}
			if !ss.busy {
				ss.refuseEarlyData()
			}
		}
	}
	// The client closed the channel (or the connection died). Anything still
	// running was started for this channel and has no one left to report to:
	// kill it, as sshd does by closing its pipes, but without relying on the
	// command noticing.
	ss.kill()
	// The channel is closed, so the pre-reader's Read has returned or is
	// about to.
	<-ss.pre.done
	if !ss.busy {
		return
	}
	if ss.sub != nil && ss.sub.Abandon() {
		// The subsystem (SFTP) is in the middle of a request, which may be
		// stuck in the kernel (a hung file system) where nothing can
		// interrupt it: the session is over without it, so that neither
		// this connection's end nor the server's shutdown waits on it. Its
		// goroutine cleans up (SFTP closes the session's handles) when the
		// kernel returns.
		ss.srv.log.Debug("subsystem channel closed during a request; not waiting for it", "remote", ss.remote)
		return
	}
	<-ss.done
}

// reply serves one request and answers it, if the client wants an answer
// and handle has not answered it already.
func (ss *session) reply(req *gossh.Request) {
	if f := ss.srv.beforeRequest; f != nil {
		f(ss, req)
	}
	ok := ss.handle(req)
	if req.WantReply {
		req.Reply(ok, nil)
	}
}

// refuseEarlyData closes a session that received MaxDataBeforeRequest bytes
// of data before any exec, shell or subsystem request, saying why on its
// stderr. Later requests are refused; what the client still sends is read
// and dropped until it closes its end (after the close x/crypto grants it
// no more window), so the channel holds none of it meanwhile.
func (ss *session) refuseEarlyData() {
	ss.busy = true
	ss.pre.discard()
	ss.srv.log.Info("session channel closed: data before any request", "remote", ss.remote,
		"limit", MaxDataBeforeRequest)
	go func() {
		defer close(ss.done)
		ss.slot.end()
		fmt.Fprintf(ss.ch.Stderr(), "agentbe: this session received %d bytes of data before an exec, shell or subsystem "+
			"request, and nothing reads data sent before one; closing the channel\n", MaxDataBeforeRequest)
		_ = ss.ch.CloseWrite()
		_ = ss.ch.Close()
		_, _ = io.Copy(io.Discard, ss.ch)
	}()
}

// handle serves one channel request and says whether it succeeded.
func (ss *session) handle(req *gossh.Request) bool {
	switch req.Type {
	case "env":
		var kv struct{ Name, Value string }
		if gossh.Unmarshal(req.Payload, &kv) != nil || ss.busy {
			return false
		}
		// Like sshd's AcceptEnv: names outside the allowlist are refused
		// (OpenSSH prints nothing and carries on), so a client cannot set
		// LD_PRELOAD or BASH_ENV for the commands it runs. The sandbox
		// filters what is allowed once more.
		if !ss.srv.envAllowed(kv.Name) {
			return false
		}
		return ss.setEnv(kv.Name, kv.Value)

	case "pty-req":
		var p struct {
			Term                 string
			Cols, Rows, PxW, PxH uint32
			Modes                string
		}
		if gossh.Unmarshal(req.Payload, &p) != nil || ss.busy || ss.pty != nil || ss.conn.denied(PermNoPty) {
			return false
		}
		ss.pty = &sandbox.Pty{Term: p.Term, Cols: clamp16(p.Cols), Rows: clamp16(p.Rows)}
		return true

	case "window-change":
		var w struct{ Cols, Rows, PxW, PxH uint32 }
		if gossh.Unmarshal(req.Payload, &w) != nil || ss.pty == nil {
			return false
		}
		ss.pty.Cols, ss.pty.Rows = clamp16(w.Cols), clamp16(w.Rows)
		if p := ss.process(); p != nil {
			return p.Resize(ss.pty.Cols, ss.pty.Rows) == nil
		}
		return true

	case "signal":
		var sig struct{ Name string }
		if gossh.Unmarshal(req.Payload, &sig) != nil {
			return false
		}
		if p := ss.process(); p != nil {
			return p.Signal(sig.Name) == nil
		}
		return false

	case "exec", "shell":
		if ss.busy {
			return false
		}
		var cmd struct{ Command string }
		if req.Type == "exec" && gossh.Unmarshal(req.Payload, &cmd) != nil {
			return false
		}
		ss.busy = true
		ss.pre.take()
		if req.Type == "exec" {
			if sub := ss.commandHandler(cmd.Command); sub != nil {
				ss.kind, ss.command, ss.started = "scp", cmd.Command, time.Now()
				ss.sub = sub
				accept(req)
				go ss.serveSubsystem()
				return true
			}
		}
		// Accepted even if the command is then refused: like sshd, the
		// reason goes to stderr with an exit status, which every client
		// shows, where a failed request would only say "exec failed".
		// The reply goes first: output, exit-status or the channel's close
		// must not overtake it (a client seeing the close first reports
		// the request itself as failed).
		accept(req)
		ss.kind, ss.command, ss.started = req.Type, cmd.Command, time.Now()
		ss.start(req.Type, cmd.Command)
		if f := ss.srv.afterStart; f != nil {
			f(ss)
		}
		return true

	case "subsystem":
		var sub struct{ Name string }
		if gossh.Unmarshal(req.Payload, &sub) != nil || ss.busy {
			return false
		}
		h := ss.srv.cfg.subsystems[sub.Name]
		if h == nil {
			return false
		}
		ss.busy = true
		ss.pre.take()
		ss.kind, ss.started = sub.Name, time.Now()
		ss.sub = h.Start(ss.ctx, ss.conn, ss.channelRW())
		accept(req)
		go ss.serveSubsystem()
		return true

	default:
		// x11-req, auth-agent-req@openssh.com, break, ...: not offered.
		return false
	}
}

// setEnv keeps an allowed env request's variable, within MaxSessionEnv
// and MaxSessionEnvBytes.
func (ss *session) setEnv(name, value string) bool {
	n := ss.envLen + len(name) + len(value)
	old, replace := ss.env[name]
	if replace {
		n -= len(name) + len(old)
	}
	if n > MaxSessionEnvBytes || (!replace && len(ss.env) >= MaxSessionEnv) {
		return false
	}
	if ss.env == nil {
		ss.env = make(map[string]string)
	}
	ss.env[name], ss.envLen = value, n
	return true
}

// channelRW is the channel as a subsystem's stdin and stdout (its data
// from the start, what the pre-reader read included), counted for
// Config.SessionEnded when it is set.
func (ss *session) channelRW() io.ReadWriter {
	if ss.srv.cfg.SessionEnded != nil {
		return countingRW{ss.pre.in(), &ss.bytesIn, &ss.bytesOut}
	}
	return ss.pre.in()
}

// commandHandler returns the Subsystem of the first CommandHandler that
// serves command itself, or nil when the executor is to run it.
func (ss *session) commandHandler(command string) Subsystem {
	for _, h := range ss.srv.cfg.commands {
		if sub := h.StartCommand(ss.ctx, ss.conn, command, ss.channelRW(), ss.ch.Stderr()); sub != nil {
			return sub
		}
	}
	return nil
}

// accept replies success to req now, and marks it answered for serve.
func accept(req *gossh.Request) {
	if req.WantReply {
		req.Reply(true, nil)
		req.WantReply = false
	}
}

func (ss *session) process() sandbox.Process {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.proc
}

// kill ends the running command, if any, and everything it started.
// Cancelling Start's context, rather than sending KILL, is what reaches the
// whole tree in every mode: under bwrap, Signal goes to the processes inside
// the sandbox, and one that is still being set up would miss it.
func (ss *session) kill() {
	ss.mu.Lock()
	cancel := ss.cancel
	ss.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// start runs the command and, on a goroutine, reports its end.
func (ss *session) start(kind, command string) {
	srv := ss.srv
	if srv.cfg.Executor == nil {
		go ss.refuse("agentbe: this workspace has no command execution (an in-memory workspace " +
			"serves files only); use SFTP or the MCP file tools")
		return
	}
	if ss.conn.noExec {
		go ss.refuse("agentbe: this connection's token may not run commands; use SFTP, or a token with exec")
		return
	}
	if kind == "exec" && strings.TrimSpace(command) == "" {
		// The executor would take "" for an interactive shell; an exec
		// request means a command, and an empty one is a client mistake.
		go ss.refuse("agentbe: empty command")
		return
	}
	if dir, ok := admit.CommandDir(command); ok && kind == "exec" && !admit.WithinRoot(dir, srv.cfg.Root, srv.cfg.Workspace.Root()) {
		// A client library cds into its rootDir first: one outside the
		// root is a client configured for another root, which would
		// otherwise fail later and misleadingly (a system path refused, a
		// missing directory).
		go ss.refuse("agentbe: " + admit.RootMismatch(cmp.Or(srv.cfg.Root, srv.cfg.Workspace.Root()), dir))
		return
	}
	if kind == "shell" {
		// An empty command is the executor's shell itself, interactive on a
		// pty (or reading commands from stdin without one). Typed input
		// cannot be judged by the safety policy, so software mode refuses a
		// shell whenever the policy is on, pty or not; bwrap and none allow it.
		command = ""
	}
	env := make(map[string]string, len(ss.env)+1)
	for k, v := range ss.env {
		env[k] = v
	}
	if ss.pty != nil && ss.pty.Term != "" {
		env["TERM"] = ss.pty.Term
	}
	var pty *sandbox.Pty
	if ss.pty != nil {
		p := *ss.pty
		pty = &p
	}
	req := sandbox.Request{
		Command:   command,
		Workspace: ss.conn.Workspace(),
		Env:       env,
		Pty:       pty,
	}
	stdio := sandbox.Stdio{Stdin: ss.pre.in(), Stdout: ss.ch, Stderr: ss.ch.Stderr()}
	if srv.cfg.SessionEnded != nil {
		stdio = sandbox.Stdio{
			Stdin:  countingRW{ss.pre.in(), &ss.bytesIn, &ss.bytesOut},
			Stdout: countingRW{ss.ch, &ss.bytesIn, &ss.bytesOut},
			Stderr: countingRW{ss.ch.Stderr(), &ss.bytesIn, &ss.bytesOut},
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	proc, err := srv.cfg.Executor.Start(ctx, req, stdio)
	if err != nil {
		cancel()
		go ss.refuse(refusal(err))
		return
	}
	ss.mu.Lock()
	ss.proc, ss.cancel = proc, cancel
	ss.mu.Unlock()

	go func() {
		defer close(ss.done)
		defer cancel()
		// Connection gone (client vanished, keepalive timeout, shutdown):
		// kill the command rather than leave it running unattended.
		stopWatch := context.AfterFunc(ss.ctx, ss.kill)
		defer stopWatch()

		st, err := proc.Wait()
		if err != nil {
			fmt.Fprintf(ss.ch.Stderr(), "agentbe: %v\n", err)
			if st.Code == 0 {
				st.Code = 255
			}
		}
		ss.exit(st)
	}()
}

// refusal words the error of a command that could not start; a policy
// refusal reads as on MCP (policy.RefusalText).
func refusal(err error) string {
	if text, ok := policy.RefusalText(err); ok {
		return text
	}
	return "agentbe: " + err.Error()
}

// refuse ends a session whose command did not run.
func (ss *session) refuse(msg string) {
	defer close(ss.done)
	ss.refused = true
	fmt.Fprintln(ss.ch.Stderr(), msg)
	ss.exit(sandbox.ExitStatus{Code: exitCannotExecute})
}

// exit reports how the command ended and closes the channel, in the order
// OpenSSH uses: EOF, exit-status, (exit-signal), close.
//
// On death by signal we send exit-status 128+n first and exit-signal second.
// ssh2 (the Node clients) keeps only the first of the two it receives and, if
// that is exit-signal, reports the exit code as null, which the agent-backend
// client turns into 0: a killed command would look successful. OpenSSH's ssh
// only looks at exit-status (so `ssh host 'kill -9 $$'` exits 137, as a shell
// would), while x/crypto/ssh and Python clients read both.
func (ss *session) exit(st sandbox.ExitStatus) {
	// The session is over before the client hears so: once the client
	// answers the close, the session's goroutine releases the slot, and a
	// channel opened right after waits for that (chanSlots).
	ss.slot.end()
	ss.report(st)
	_ = ss.ch.CloseWrite()
	code := st.Code
	_, _ = ss.ch.SendRequest("exit-status", false, gossh.Marshal(struct{ Status uint32 }{uint32(code)}))
	if st.Signal != "" {
		msg := "killed by signal " + st.Signal
		if st.TimedOut {
			msg = "timed out (killed by signal " + st.Signal + ")"
		}
		_, _ = ss.ch.SendRequest("exit-signal", false, gossh.Marshal(struct {
			Signal     string
			CoreDumped bool
			Message    string
			Lang       string
		}{st.Signal, false, msg, ""}))
	}
	_ = ss.ch.Close()
}

// report tells Config.SessionEnded how the session ended.
func (ss *session) report(st sandbox.ExitStatus) {
	f := ss.srv.cfg.SessionEnded
	if f == nil {
		return
	}
	outcome := "ok"
	switch {
	case ss.refused:
		outcome = "refused"
	case st.TimedOut:
		outcome = "timeout"
	case st.Code != 0 || st.Signal != "":
		outcome = "error"
	}
	f(SessionRecord{
		Kind: ss.kind, Command: ss.command, Remote: ss.remote, Scope: ss.conn.scope, Caller: ss.conn.caller, Start: ss.started,
		Duration: time.Since(ss.started), Outcome: outcome, ExitCode: st.Code,
		BytesIn: ss.bytesIn.Load(), BytesOut: ss.bytesOut.Load(),
	})
}

// countingRW counts the bytes read from and written to a channel.
type countingRW struct {
	rw      io.ReadWriter
	in, out *atomic.Int64
}

func (c countingRW) Read(p []byte) (int, error) {
	n, err := c.rw.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c countingRW) Write(p []byte) (int, error) {
	n, err := c.rw.Write(p)
	c.out.Add(int64(n))
	return n, err
}

// serveSubsystem runs the subsystem on the channel until it ends (the
// client closed the channel, or the connection died), then reports its exit
// status (0 unless it is an ExitCoder) and closes the channel.
func (ss *session) serveSubsystem() {
	defer close(ss.done)
	// The subsystem's reads end when the channel closes; make sure they do
	// when the connection dies too.
	stop := context.AfterFunc(ss.ctx, func() { _ = ss.ch.Close() })
	err := ss.sub.Serve()
	stop()
	if err != nil {
		subsystemEnded(ss, err)
	}
	var st sandbox.ExitStatus
	if ec, ok := ss.sub.(ExitCoder); ok {
		st.Code = ec.ExitCode()
	}
	ss.exit(st)
}

// subsystemEnded logs a subsystem's error; out of line, so that
// serveSubsystem's frame, under every request's stack, stays small.
//
//go:noinline
func subsystemEnded(ss *session, err error) {
	ss.srv.log.Debug("subsystem ended", "remote", ss.remote, "err", err)
}

func clamp16(v uint32) uint16 {
	if v > 0xffff {
		return 0xffff
	}
	return uint16(v)
}

// The --run-as attack review over the wire: a root daemon whose commands
// run as an unprivileged user, driven through SSH (the port and /ssh),
// SFTP and MCP, in bwrap and landlock mode. Every command of every scope
// runs as the same uid, so what keeps one scope's command from another's
// is the isolation mode, not the uid.

package daemon

import (
	"encoding/json"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// runAsUser is the user the daemon's commands run as in these tests:
// nobody, as in TestRunAsOwnsWhatFileToolsWrite.
func runAsUser(t *testing.T) (uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "--run-as needs the daemon to run as root (the tests run as root in CI)")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		testenv.Missing(t, "no user nobody to name in --run-as (Debian has one)")
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// startRunAs starts startIsolated's daemon with --run-as nobody, a
// workspace nobody owns, and an audit log.
// Two tokens on /ssh are bound to scopes: alice-token to a, bob-token
// to b.
func startRunAs(t *testing.T, mode string, tweak ...func(*config.Config)) (*isoDaemon, int, int) {
	t.Helper()
	uid, gid := runAsUser(t)
	root := testenv.SharedTempDir(t)
	ws := filepath.Join(root, "ws")
	for _, dir := range []string{ws, filepath.Join(ws, "a"), filepath.Join(ws, "b")} {
		must(t, os.Mkdir(dir, 0o755))
		must(t, os.Chown(dir, uid, gid))
	}
	state := t.TempDir()
	d := startIsolated(t, mode, func(c *config.Config) {
		c.Root = ws
		c.RunAs = "nobody"
		c.AuditLog = filepath.Join(state, "audit.log")
		tokens := filepath.Join(state, "tokens.json")
		must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+tokenLine("alice", "alice-token", `,"scope":"a"`)+`,`+
			tokenLine("bob", "bob-token", `,"scope":"b"`)+`]}`), 0o600))
		c.TokensFile = tokens
		for _, tw := range tweak {
			tw(c)
		}
	})
	return d, uid, gid
}

// peerProbe tries, as the command's user, everything a command could do
// to another command of the same uid (argv[1]) and to the daemon
// (argv[2]): signal it, ptrace it, read its environment, working directory,
// descriptors and memory, open its stdin; open a pty by name and push
// input into it (argv[3]); read the files named after it. One line each:
// name=ok or name=<errno>.
const peerProbe = `import os, sys, ctypes, fcntl, termios, errno, resource
def t(name, f):
    try:
        r = f()
        print(name + "=ok " + repr(r)[:120])
    except OSError as e:
        print(name + "=" + errno.errorcode.get(e.errno, str(e.errno)))
    except Exception as e:
        print(name + "=ERR " + str(e))
peer, dpid, pts, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
libc = ctypes.CDLL(None, use_errno=True)
def ptrace(p):
    if libc.ptrace(16, p, 0, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    libc.ptrace(17, p, 0, 0)
    return "attached"
def ioprio(p):
    # ioprio_set(IOPRIO_WHO_PROCESS, p, IOPRIO_CLASS_IDLE << 13)
    if libc.syscall(251, 1, p, 3 << 13) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
def sti(path):
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    fcntl.ioctl(fd, termios.TIOCSTI, b"x")
for who, p in (("peer", peer), ("daemon", dpid)):
    t(who + ".kill0", lambda p=p: os.kill(p, 0))
    t(who + ".environ", lambda p=p: open("/proc/%d/environ" % p, "rb").read())
    t(who + ".cwd", lambda p=p: os.readlink("/proc/%d/cwd" % p))
    t(who + ".fds", lambda p=p: os.listdir("/proc/%d/fd" % p))
    t(who + ".fdlink", lambda p=p: os.readlink("/proc/%d/fd/0" % p))
    t(who + ".fd0", lambda p=p: os.open("/proc/%d/fd/0" % p, os.O_RDWR | os.O_NOCTTY))
    t(who + ".mem", lambda p=p: open("/proc/%d/mem" % p, "rb").read(1))
    t(who + ".ptrace", lambda p=p: ptrace(p))
    t(who + ".sti", lambda p=p: sti("/proc/%d/fd/0" % p))
    t(who + ".prlimit", lambda p=p: resource.prlimit(p, resource.RLIMIT_CPU, (1, 1)))
    t(who + ".nofile", lambda p=p: resource.prlimit(p, resource.RLIMIT_NOFILE, (3, 3)))
    t(who + ".renice", lambda p=p: os.setpriority(os.PRIO_PROCESS, p, 19))
    t(who + ".affinity", lambda p=p: os.sched_setaffinity(p, {0}))
    t(who + ".sched", lambda p=p: os.sched_setscheduler(p, os.SCHED_IDLE, os.sched_param(0)))
    t(who + ".ioprio", lambda p=p: ioprio(p))
    t(who + ".oomadj", lambda p=p: open("/proc/%d/oom_score_adj" % p, "w").write("1000"))
t("pts.open", lambda: os.open(pts, os.O_RDWR | os.O_NOCTTY))
t("pts.sti", lambda: sti(pts))
for i, f in enumerate(files):
    t("file%d" % i, lambda f=f: open(f, "rb").read(16))
t("peer.term", lambda: os.kill(peer, 15))
t("daemon.term", lambda: os.kill(dpid, 15))
print("PROBE-END")
`

func probeResults(t *testing.T, out string) map[string]string {
	t.Helper()
	if !strings.Contains(out, "PROBE-END") {
		t.Fatalf("the probe did not run: %q", out)
	}
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			got[k] = v
		}
	}
	return got
}

// TestAttackRunAsPeerCommand: under --run-as every command runs as the
// same uid, so the uid does not keep one session's (or scope's) command
// from another's. Session B runs a shell on a pty whose command holds a
// secret in its environment; session A's command (over the other
// transport, from another scope, and through MCP exec) tries to signal, ptrace and read B's command, to open B's pty
// by its name or through /proc/<pid>/fd/0 and push input into it, and
// does the same to the daemon, whose host key, audit log, state directory
// and the test's own files it also tries to read. In bwrap mode B's pid
// is not in A's pid namespace; in landlock mode the two commands are in
// different Landlock domains, which refuse ptrace, /proc access and (ABI
// 6) signals across them. B's command survives and its pty gets nothing.
func TestAttackRunAsPeerCommand(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d, _, _ := startRunAs(t, mode)
			for _, dir := range []string{d.c.Root, filepath.Join(d.c.Root, "a")} {
				must(t, os.WriteFile(filepath.Join(dir, "probe.py"), []byte(peerProbe), 0o644))
			}
			cls := d.clients(t)
			overSSH := func(cl *gossh.Client) func(string) string {
				return func(cmd string) string {
					a, err := cl.NewSession()
					must(t, err)
					defer a.Close()
					out, _ := a.CombinedOutput(cmd)
					return string(out)
				}
			}
			overMCP := func(cmd string) string {
				args, _ := json.Marshal(map[string]string{"command": cmd})
				_, body := callAs(t, d.r.url, "alice-token", "", "exec", string(args))
				return chainText(body)
			}
			for _, tc := range []struct {
				name string
				a    func(string) string
				b    *gossh.Client
			}{
				{"same scope, the port and /ssh", overSSH(cls["ws"]), cls["port"]},
				{"scope a against scope b", overSSH(sshAs(t, d.r.url, "alice-token")), sshAs(t, d.r.url, "bob-token")},
				{"scope a's MCP exec against scope b", overMCP, sshAs(t, d.r.url, "bob-token")},
			} {
				t.Run(tc.name, func(t *testing.T) { peerAttack(t, d, mode, tc.a, tc.b) })
			}
		})
	}
}

// peerAttack runs B's command on a pty through b and the probe against it
// through a.
func peerAttack(t *testing.T, d *isoDaemon, mode string, runA func(string) string, cb *gossh.Client) {
	marker := newMarker()
	b, err := cb.NewSession()
	must(t, err)
	defer b.Close()
	must(t, b.RequestPty("xterm", 24, 80, gossh.TerminalModes{}))
	var bout syncbuf.Buffer
	b.Stdout, b.Stderr = &bout, &bout
	must(t, b.Start("ipcmk -M 4096 -p 0600; ipcmk -Q -p 0600; tty; echo BTTY; env AGENTBE_PEER_SECRET=s3cret sleep "+marker))
	waitFor(t, "B's sleeper", func() bool { return len(sleepers(marker)) == 1 })
	peer := sleepers(marker)[0]
	// B's pty by the name it has on the host: the daemon's ptys.
	pts, _ := os.Readlink("/proc/" + peer + "/fd/0")
	if !strings.HasPrefix(pts, "/dev/pts/") {
		t.Fatalf("B's stdin is %q, want a pty", pts)
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(pts, &st))
	if st.Uid != 0 || st.Mode&0o077 != 0 {
		t.Errorf("B's pty %s is uid %d mode %o; want root's (the daemon's), 0600", pts, st.Uid, st.Mode&0o777)
	}
	files := []string{d.c.SSHHostKey, d.c.AuditLog, filepath.Dir(d.c.AuditLog), d.c.TokensFile, d.c.StateDir}
	outside := filepath.Join(filepath.Dir(d.c.Root), "outside.txt")
	must(t, os.WriteFile(outside, []byte("outside\n"), 0o644))
	files = append(files, outside)
	out := runA("/usr/bin/python3 probe.py " + peer + " " + strconv.Itoa(os.Getpid()) + " " + pts + " " + strings.Join(files, " "))
	got := probeResults(t, out)
	t.Logf("probe: %s", out)
	for k, v := range got {
		if k == "peer.fds" && mode == "landlock" {
			// A directory of the uid's own, mode 0500: the numbers of
			// B's descriptors, not what they are (peer.fdlink,
			// peer.fd0), a gap the mode states.
			continue
		}
		if strings.HasPrefix(v, "ok") {
			t.Errorf("%s: %s succeeded from another session's command: %s", mode, k, v)
		}
	}
	// B's SysV shared memory and message queue: each command has an
	// IPC namespace of its own (bwrap; landlock where the daemon has
	// CAP_SYS_ADMIN, as a root daemon on a host has).
	if ipc := runA("echo IPC $(ipcs -m | grep -c nobody) $(ipcs -q | grep -c nobody)"); !strings.Contains(ipc, "IPC 0 0") {
		t.Errorf("%s: A sees B's SysV IPC objects: %q", mode, ipc)
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("B's environment reached A: %s", out)
	}
	if len(sleepers(marker)) != 1 {
		t.Errorf("B's command did not survive A's probe")
	}
	if strings.Contains(bout.String(), "x") {
		t.Errorf("input reached B's pty: %q", bout.String())
	}
}

// TestAttackRunAsPty: a shell on a pty, under --run-as, in both modes and
// over both transports, runs as the user and can use its terminal (its
// descriptors and /dev/tty) though the pty stays the daemon's, 0600: the
// user's commands of every session share one uid, so a pty given to that
// uid would be open to every other session's command that can name it.
func TestAttackRunAsPty(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d, uid, _ := startRunAs(t, mode)
			for transport, cl := range d.clients(t) {
				s, err := cl.NewSession()
				must(t, err)
				must(t, s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}))
				var out syncbuf.Buffer
				s.Stdout, s.Stderr = &out, &out
				stdin, err := s.StdinPipe()
				must(t, err)
				must(t, s.Shell())
				_, err = io.WriteString(stdin, "echo U=$(id -u); echo T=$(tty); echo M=$(stat -L -c %u:%a /proc/self/fd/0); echo hi >/dev/tty && echo DEVTTY-OK; echo hi >&0 && echo FD-OK; exit 4\n")
				must(t, err)
				err = s.Wait()
				s.Close()
				o := out.String()
				if e, ok := err.(*gossh.ExitError); !ok || e.ExitStatus() != 4 {
					t.Errorf("%s %s: exit %v, want 4; %q", mode, transport, err, o)
				}
				if !strings.Contains(o, "U="+strconv.Itoa(uid)) {
					t.Errorf("%s %s: the shell is not the run-as user's: %q", mode, transport, o)
				}
				if !strings.Contains(o, "DEVTTY-OK") || !strings.Contains(o, "FD-OK") {
					t.Errorf("%s %s: the run-as user's shell cannot use its terminal: %q", mode, transport, o)
				}
				// Inside bwrap's user namespace root, unmapped, shows as
				// the overflow uid; TestAttackRunAsPeerCommand checks the
				// owner from the host.
				if want := "M=0:600"; mode == "landlock" && !strings.Contains(o, want) || !strings.Contains(o, ":600\r") {
					t.Errorf("%s %s: the pty is not the daemon's 0600: %q", mode, transport, o)
				}
			}
		})
	}
}

// TestAttackRunAsFilesOverTheWire: what SFTP, scp (asked for 04755) and
// MCP's write_file (a token bound to scope a) write under --run-as is the
// user's, without setuid/setgid; the user's command can then change it. The command cannot make its own file
// setuid (the seccomp filter of both modes refuses the bit, also through a
// chmod the policy does not see), and cannot hard-link a root 0600 file,
// inside the workspace or outside, for SFTP to read as root
// (fs.protected_hardlinks; outside, also the mode's boundary).
func TestAttackRunAsFilesOverTheWire(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d, uid, gid := startRunAs(t, mode)
			secret := filepath.Join(filepath.Dir(d.c.Root), "rootsecret")
			must(t, os.WriteFile(secret, []byte("root-only\n"), 0o600))
			inside := filepath.Join(d.c.Root, "opsecret")
			must(t, os.WriteFile(inside, []byte("op-only\n"), 0o600))
			cl := d.clients(t)["port"]
			fc, err := sftp.NewClient(cl)
			must(t, err)
			defer fc.Close()
			f, err := fc.OpenFile("new.txt", os.O_CREATE|os.O_WRONLY|os.O_EXCL)
			must(t, err)
			_, err = f.Write([]byte("agent\n"))
			must(t, err)
			must(t, f.Close())
			must(t, fc.Chmod("new.txt", 0o6755))
			must(t, fc.Mkdir("newdir"))
			// scp's sink, asked for a setuid file.
			sc, err := cl.NewSession()
			must(t, err)
			sc.Stdin = strings.NewReader("C4755 6 scp.txt\nagent\n\x00")
			if out, err := sc.CombinedOutput("scp -t ."); err != nil {
				t.Errorf("scp -t: %v %q", err, out)
			}
			sc.Close()
			// MCP's write_file through a token bound to scope a.
			if code, body := callAs(t, d.r.url, "alice-token", "", "write_file", `{"path":"sub/w.txt","content":"w\n"}`); code != 200 || strings.Contains(body, `"isError":true`) {
				t.Fatalf("write_file: %d %s", code, body)
			}
			for _, name := range []string{"new.txt", "newdir", "scp.txt", "a/sub", "a/sub/w.txt"} {
				var st syscall.Stat_t
				must(t, syscall.Lstat(filepath.Join(d.c.Root, name), &st))
				if int(st.Uid) != uid || int(st.Gid) != gid || st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
					t.Errorf("%s over SFTP: uid %d gid %d mode %o; want the run-as user's, no setuid/setgid", name, st.Uid, st.Gid, st.Mode&0o7777)
				}
			}
			s, err := cl.NewSession()
			must(t, err)
			out, _ := s.CombinedOutput("id -u; echo more >> new.txt && chmod 600 new.txt && echo CHANGED; cp /bin/id suid && /usr/bin/python3 -c 'import os; os.chmod(\"suid\", 0o4755)' && ./suid -u; " +
				"ln " + inside + " link1 2>&1; ln " + secret + " link2 2>&1; cat opsecret 2>&1; echo DONE")
			s.Close()
			o := string(out)
			t.Logf("%s", o)
			if !strings.Contains(o, "CHANGED") || !strings.Contains(o, "DONE") {
				t.Fatalf("the command could not change what SFTP wrote: %q", o)
			}
			if strings.Contains(o, "\n0\n") || strings.Contains(o, "op-only") {
				t.Errorf("the command ran as root or read the operator's file: %q", o)
			}
			for _, name := range []string{"link1", "link2"} {
				if _, err := os.Lstat(filepath.Join(d.c.Root, name)); err == nil {
					t.Errorf("%s: a hard link to a root 0600 file was made", name)
				}
				if f, err := fc.Open(name); err == nil {
					b, _ := io.ReadAll(f)
					f.Close()
					t.Errorf("%s read over SFTP: %q", name, b)
				}
			}
			var st syscall.Stat_t
			if syscall.Stat(filepath.Join(d.c.Root, "suid"), &st) == nil && (int(st.Uid) != uid || st.Mode&syscall.S_ISUID != 0) {
				t.Errorf("the command's copy of id is uid %d mode %o; want the user's, not setuid (seccomp refuses the bit)", st.Uid, st.Mode&0o7777)
			}
		})
	}
}

// TestAttackRunAsSignalAndLeftovers: a signal request reaches the run-as
// user's command (its trap chooses the exit status), and what it leaves
// behind, running as that user, dies with the session.
func TestAttackRunAsSignalAndLeftovers(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d, _, _ := startRunAs(t, mode)
			for transport, cl := range d.clients(t) {
				for _, pty := range []bool{false, true} {
					code, _, out := signalled(t, cl, pty, "trap 'exit 7' TERM; echo READY; while :; do sleep 0.1; done", "TERM")
					if code != 7 {
						t.Errorf("%s %s pty=%v: TERM gave exit %d, want the trap's 7; %q", mode, transport, pty, code, out)
					}
					marker := newMarker()
					s, err := cl.NewSession()
					must(t, err)
					if pty {
						must(t, s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}))
					}
					var o syncbuf.Buffer
					s.Stdout, s.Stderr = &o, &o
					must(t, s.Start(leaveBehind(marker)+"sleep 600\n"))
					waitFor(t, "the six sleepers", func() bool { return len(sleepers(marker)) >= 6 })
					for _, pid := range sleepers(marker) {
						var st syscall.Stat_t
						if syscall.Stat("/proc/"+pid, &st) == nil && st.Uid == 0 {
							t.Errorf("a command's process runs as root")
						}
					}
					s.Close()
					waitFor(t, "no sleeper left", func() bool { return len(sleepers(marker)) == 0 })
				}
			}
		})
	}
}

// TestAttackRunAsForkBomb: the run-as user's commands of two scopes fork
// as many sleepers as they can at once; each command stops at its own
// bound (--exec-max-processes, the pids.max of its cgroup), whichever uid
// runs it, and what they made dies with them. The bound is per command:
// the user's processes across commands are bounded by
// --exec-max-concurrent times it (docs/configuration.md).
func TestAttackRunAsForkBomb(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d, _, _ := startRunAs(t, mode, func(c *config.Config) { c.ExecMaxProcesses = 32 })
			ws := d.c.Root
			marker := newMarker()
			// Each fork stops at the first refusal (bash would retry).
			bomb := "import os, time\nn = 0\nfor i in range(100):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n" +
				"    if pid == 0:\n        os.execv('/bin/sleep', ['sleep', '" + marker + "'])\n    n += 1\nprint('FORKED', n, flush=True)\ntime.sleep(600)\n"
			for _, dir := range []string{"a", "b"} {
				must(t, os.WriteFile(filepath.Join(ws, dir, "bomb.py"), []byte(bomb), 0o644))
			}
			var outs [2]syncbuf.Buffer
			var sessions []*gossh.Session
			for i, tok := range []string{"alice-token", "bob-token"} {
				s, err := sshAs(t, d.r.url, tok).NewSession()
				must(t, err)
				defer s.Close()
				sessions = append(sessions, s)
				s.Stdout, s.Stderr = &outs[i], &outs[i]
				must(t, s.Start("exec /usr/bin/python3 bomb.py"))
			}
			waitFor(t, "both bombs", func() bool {
				return strings.Contains(outs[0].String(), "FORKED") && strings.Contains(outs[1].String(), "FORKED")
			})
			n := len(sleepers(marker))
			t.Logf("%s: %d sleepers of two commands bounded at 32 each", mode, n)
			if n > 2*32 || n == 0 {
				t.Errorf("%s: %d sleepers of two commands, want some and at most 64", mode, n)
			}
			for _, s := range sessions {
				s.Close()
			}
			waitFor(t, "no sleeper left", func() bool { return len(sleepers(marker)) == 0 })
		})
	}
}

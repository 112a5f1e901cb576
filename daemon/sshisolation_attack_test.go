// The SSH attack review in the real isolation modes (bwrap, landlock),
// driven over the SSH port and /ssh: descriptors, processes left behind,
// signals, scopes, env requests and ptys.

package daemon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// isoDaemon is a daemon in a real isolation mode with a token on /ssh and
// a key on the SSH port.
type isoDaemon struct {
	r      *running
	c      config.Config
	signer gossh.Signer
}

// startIsolated starts a daemon in mode (bwrap or landlock), with the
// token previewToken on /ssh and a key on --ssh-listen. A bwrap run
// without bwrap ends through testenv (a failure under CI=true); a kernel
// without Landlock skips.
func startIsolated(t *testing.T, mode string, tweak func(*config.Config)) *isoDaemon {
	t.Helper()
	switch mode {
	case "bwrap":
		testenv.Bwrap(t)
	case "landlock":
		if sandbox.LandlockABI() < 1 {
			t.Skip("this kernel has no Landlock")
		}
	}
	dir := t.TempDir()
	_, line, signer := clientKey(t, dir, "key")
	authz := filepath.Join(dir, "authorized_keys")
	must(t, os.WriteFile(authz, []byte(line+"\n"), 0o600))
	c := testConfig(t)
	c.Isolation = mode
	c.AuthToken = previewToken
	c.SSHListen = freeAddr(t)
	c.SSHAuthorizedKeys = authz
	if tweak != nil {
		tweak(&c)
	}
	must(t, c.Validate())
	r := start(t, c, nil)
	waitFor(t, "the SSH port", func() bool { return r.d.SSHAddr() != "" })
	return &isoDaemon{r: r, c: c, signer: signer}
}

// clients returns a client of each transport: the SSH port and /ssh.
func (d *isoDaemon) clients(t *testing.T) map[string]*gossh.Client {
	t.Helper()
	cl, err := gossh.Dial("tcp", d.r.d.SSHAddr(), &gossh.ClientConfig{User: "agent",
		Auth: []gossh.AuthMethod{gossh.PublicKeys(d.signer)}, HostKeyCallback: gossh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return map[string]*gossh.Client{"port": cl, "ws": sshAs(t, d.r.url, previewToken)}
}

// sleepers returns the live processes (not zombies) of the host running
// `sleep <marker>`, as pids, read from /proc.
func sleepers(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + pid + "/cmdline")
		if err != nil || string(b) != "sleep\x00"+marker+"\x00" {
			continue
		}
		st, _ := os.ReadFile("/proc/" + pid + "/stat")
		if i := strings.LastIndexByte(string(st), ')'); i > 0 && len(st) > i+2 && st[i+2] == 'Z' {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// leaveBehind is a script that leaves sleep <marker> behind in every way a
// shell can: a background job, one disowned, nohup, a double fork, setsid in
// the background and setsid -f; then it says READY.
func leaveBehind(marker string) string {
	m := marker
	return "sleep " + m + " &\nsleep " + m + " & disown\nnohup sleep " + m + " >/dev/null 2>&1 &\n(sleep " + m + " &)\n" +
		"setsid sleep " + m + " &\nsetsid -f sleep " + m + "\necho RE''ADY\n"
}

var markerSeq atomic.Int64

func newMarker() string {
	return strconv.FormatInt(4_700_000+int64(os.Getpid()%1000)*100+markerSeq.Add(1), 10)
}

// TestAttackSSHLeftoversDie: a command of an SSH session, in bwrap and in
// landlock mode, on a pty and on pipes, over the SSH port and /ssh, leaves
// processes behind every way a shell can (a background job, disown, nohup,
// a double fork, setsid, setsid -f); whether the session ends by the
// shell's own exit, by the client closing the channel, or by the
// connection dropping, none of them is alive afterwards.
func TestAttackSSHLeftoversDie(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d := startIsolated(t, mode, nil)
			for _, transport := range []string{"port", "ws"} {
				for _, tc := range []struct {
					name  string
					pty   bool
					shell bool
					end   string // "exit", "close", "drop"
				}{
					{"exec on pipes, exits", false, false, "exit"},
					{"exec on pipes, channel closed", false, false, "close"},
					{"exec on a pty, exits", true, false, "exit"},
					{"shell on a pty, exit typed", true, true, "exit"},
					{"shell on a pty, channel closed", true, true, "close"},
					{"shell on a pty, connection dropped", true, true, "drop"},
					{"shell on pipes, stdin closed", false, true, "exit"},
				} {
					t.Run(transport+"/"+tc.name, func(t *testing.T) {
						cl := d.clients(t)[transport]
						marker := newMarker()
						s, err := cl.NewSession()
						must(t, err)
						defer s.Close()
						if tc.pty {
							must(t, s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}))
						}
						var out syncbuf.Buffer
						s.Stdout, s.Stderr = &out, &out
						stdin, err := s.StdinPipe()
						must(t, err)
						script := leaveBehind(marker)
						if tc.shell {
							must(t, s.Shell())
							_, err = io.WriteString(stdin, script)
							must(t, err)
						} else {
							// The command waits for a line, so that the
							// sleepers are counted before it ends.
							must(t, s.Start(script+"read x\n"))
						}
						waitFor(t, "READY", func() bool { return strings.Contains(out.String(), "READY") })
						waitFor(t, "the six sleepers", func() bool { return len(sleepers(marker)) >= 6 })
						switch tc.end {
						case "exit":
							switch {
							case !tc.shell:
								_, _ = io.WriteString(stdin, "go\n")
							case tc.pty:
								_, _ = io.WriteString(stdin, "exit\n")
							default:
								stdin.Close()
							}
							err := s.Wait()
							t.Logf("exit: %v; output %q", err, out.String())
						case "close":
							s.Close()
						case "drop":
							cl.Close()
						}
						waitFor(t, "no sleeper left", func() bool { return len(sleepers(marker)) == 0 })
					})
				}
			}
		})
	}
}

// TestAttackSSHSignalReachesTheCommand: a signal request, in bwrap and in
// landlock mode, on a pty and on pipes, over both transports, reaches the
// command itself (its trap runs and chooses the exit status), not only the
// sandbox's pid 1 or bwrap; an uncaught one ends it and what it started,
// and the client hears how it died.
func TestAttackSSHSignalReachesTheCommand(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d := startIsolated(t, mode, nil)
			for transport, cl := range d.clients(t) {
				for _, pty := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/pty=%v", transport, pty), func(t *testing.T) {
						marker := newMarker()
						// A trap: the command says it got the signal and
						// exits 7.
						code, sig, out := signalled(t, cl, pty, "trap 'echo GOT-TERM; exit 7' TERM; sleep "+marker+" & echo RE''ADY; wait", "TERM")
						if code != 7 || !strings.Contains(out, "GOT-TERM") {
							t.Errorf("trapped TERM: exit %d signal %q output %q; want exit 7 and GOT-TERM", code, sig, out)
						}
						waitFor(t, "no sleeper left", func() bool { return len(sleepers(marker)) == 0 })
						// No trap: KILL ends it, the client hears 137.
						code, sig, out = signalled(t, cl, pty, "sleep "+marker+" & echo RE''ADY; wait", "KILL")
						// Under bwrap the command's death by a signal is
						// bwrap's exit status 128+n (docs/ssh.md).
						wantSig := "KILL"
						if mode == "bwrap" {
							wantSig = ""
						}
						if code != 137 || sig != wantSig {
							t.Errorf("KILL: exit %d signal %q output %q; want 137 and signal %q", code, sig, out, wantSig)
						}
						waitFor(t, "no sleeper left", func() bool { return len(sleepers(marker)) == 0 })
					})
				}
			}
		})
	}
}

// TestAttackSSHSignalToAShellsJob: in an interactive shell on a pty, in
// bwrap and in landlock mode, a signal request while a job runs in the
// foreground ends that job (the group the shell gave the terminal to,
// inside bwrap's pid namespace too) and leaves the shell, which goes on
// to the next line.
func TestAttackSSHSignalToAShellsJob(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d := startIsolated(t, mode, nil)
			for transport, cl := range d.clients(t) {
				marker := newMarker()
				s, err := cl.NewSession()
				must(t, err)
				must(t, s.RequestPty("xterm", 24, 200, gossh.TerminalModes{}))
				var out syncbuf.Buffer
				s.Stdout, s.Stderr = &out, &out
				in, err := s.StdinPipe()
				must(t, err)
				must(t, s.Shell())
				_, err = io.WriteString(in, "echo RE''ADY; sleep "+marker+"\n")
				must(t, err)
				waitFor(t, "the job", func() bool { return strings.Contains(out.String(), "READY") && len(sleepers(marker)) == 1 })
				must(t, s.Signal(gossh.SIGINT))
				waitFor(t, "the job's end", func() bool { return len(sleepers(marker)) == 0 })
				_, err = io.WriteString(in, "echo AFTER-\"$?\"; echo STILL''-HERE; exit 4\n")
				must(t, err)
				var ee *gossh.ExitError
				if err := s.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 4 || !strings.Contains(out.String(), "AFTER-130") || !strings.Contains(out.String(), "STILL-HERE") {
					t.Errorf("%s: the shell after INT to its job: %v %q; want it to go on and exit 4", transport, err, out.String())
				}
				s.Close()
			}
		})
	}
}

// signalled starts cmd, waits for READY in its output, sends the signal
// request name and returns how the command ended.
func signalled(t *testing.T, cl *gossh.Client, pty bool, cmd, name string) (code int, sig, out string) {
	t.Helper()
	s, err := cl.NewSession()
	must(t, err)
	defer s.Close()
	if pty {
		must(t, s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}))
	}
	var buf syncbuf.Buffer
	s.Stdout, s.Stderr = &buf, &buf
	must(t, s.Start(cmd))
	waitFor(t, "READY", func() bool { return strings.Contains(buf.String(), "READY") })
	if err := s.Signal(gossh.Signal(name)); err != nil {
		t.Fatalf("signal %s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("signal %s: the command still runs 10 s later; output %q", name, buf.String())
	}
	var ee *gossh.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus(), ee.Signal(), buf.String()
	}
	if err != nil {
		t.Fatalf("signal %s: %v", name, err)
	}
	return 0, "", buf.String()
}

// TestAttackSSHScopeFromAShell: a token bound to scope a, on /ssh, in
// bwrap and in landlock mode, runs a shell (on a pty and on pipes) and an
// exec that try to read and write outside a: the root's files, a sibling
// scope's, through `cd ..`, an absolute path, and the daemon's
// /proc/<pid>/root and /proc/<pid>/cwd. Nothing outside a is read or
// written; the scope's own file is.
func TestAttackSSHScopeFromAShell(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d := startIsolated(t, mode, func(c *config.Config) {
				must(t, os.MkdirAll(filepath.Join(c.Root, "a"), 0o755))
				must(t, os.MkdirAll(filepath.Join(c.Root, "b"), 0o755))
				must(t, os.WriteFile(filepath.Join(c.Root, "root-secret.txt"), []byte("ROOT-SECRET"), 0o644))
				must(t, os.WriteFile(filepath.Join(c.Root, "b", "b-secret.txt"), []byte("B-SECRET"), 0o644))
				must(t, os.WriteFile(filepath.Join(c.Root, "a", "mine.txt"), []byte("A-OWN"), 0o644))
				tokens := filepath.Join(t.TempDir(), "tokens.json")
				must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+tokenLine("alice", "alice-token", `,"scope":"a"`)+`]}`), 0o600))
				c.TokensFile = tokens
			})
			root := d.c.Root
			cl := sshAs(t, d.r.url, "alice-token")
			daemon := strconv.Itoa(os.Getpid())
			script := strings.Join([]string{
				"cat mine.txt",
				"cat ../root-secret.txt", "cat ../b/b-secret.txt",
				"cat " + root + "/root-secret.txt", "cat " + root + "/b/b-secret.txt",
				"cd .. && cat root-secret.txt", "cd " + root + " && cat b/b-secret.txt",
				"cat /proc/" + daemon + "/root" + root + "/root-secret.txt",
				"cat /proc/" + daemon + "/cwd/root-secret.txt",
				"cat /proc/1/root" + root + "/root-secret.txt",
				"echo x > ../escaped-up.txt", "echo x > " + root + "/escaped-abs.txt", "echo x > " + root + "/b/escaped-b.txt",
				"echo x > /proc/" + daemon + "/root" + root + "/escaped-proc.txt",
				"echo DO''NE",
			}, "\n") + "\n"
			for _, tc := range []struct {
				name       string
				pty, shell bool
			}{{"exec", false, false}, {"exec on a pty", true, false}, {"shell on pipes", false, true}, {"shell on a pty", true, true}} {
				s, err := cl.NewSession()
				must(t, err)
				if tc.pty {
					must(t, s.RequestPty("xterm", 24, 200, gossh.TerminalModes{}))
				}
				var out syncbuf.Buffer
				s.Stdout, s.Stderr = &out, &out
				if tc.shell {
					s.Stdin = strings.NewReader(script + "exit\n")
					must(t, s.Shell())
				} else {
					// Each line on its own: one refused does not stop the rest.
					must(t, s.Start(strings.ReplaceAll(script, "\n", " ; ")))
				}
				_ = s.Wait()
				s.Close()
				got := out.String()
				if !strings.Contains(got, "A-OWN") || !strings.Contains(got, "DONE") {
					t.Errorf("%s: the scope's own file or the end was not reached:\n%s", tc.name, got)
				}
				for _, secret := range []string{"ROOT-SECRET", "B-SECRET"} {
					if strings.Contains(got, secret) {
						t.Errorf("%s: %s was read from scope a:\n%s", tc.name, secret, got)
					}
				}
			}
			for _, f := range []string{"escaped-up.txt", "escaped-abs.txt", "b/escaped-b.txt", "escaped-proc.txt"} {
				if _, err := os.Stat(filepath.Join(root, f)); err == nil {
					t.Errorf("%s was written from scope a", f)
				}
			}
		})
	}
}

// TestAttackSSHEnvUnderStar: with --ssh-env-allowlist '*', env requests
// naming what changes how a shell or the dynamic linker starts reach
// neither a bwrap nor a landlock command, on pipes, on a pty or in a shell:
// none of them runs the code it names, and none is set in the command's
// environment; an ordinary name is.
func TestAttackSSHEnvUnderStar(t *testing.T) {
	dangerous := map[string]string{
		"LD_PRELOAD":      "/nonexistent/preload.so",
		"LD_LIBRARY_PATH": "/nonexistent",
		"LD_AUDIT":        "/nonexistent/audit.so",
		"BASH_ENV":        "./hook.sh",
		"ENV":             "./hook.sh",
		"PROMPT_COMMAND":  "echo PROMPT''-RAN",
		"SHELLOPTS":       "xtrace",
		"BASHOPTS":        "extdebug",
		"PS4":             "$(echo PS4''-RAN)",
		"IFS":             "/",
		"HOME":            "/",
	}
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d := startIsolated(t, mode, func(c *config.Config) { c.SSHEnvAllowlist = []string{"*"} })
			must(t, os.WriteFile(filepath.Join(d.c.Root, "hook.sh"), []byte("echo HOOK''-RAN\n"), 0o755))
			for transport, cl := range d.clients(t) {
				for _, tc := range []struct {
					name       string
					pty, shell bool
				}{{"exec", false, false}, {"exec on a pty", true, false}, {"shell on pipes", false, true}, {"shell on a pty", true, true}} {
					s, err := cl.NewSession()
					must(t, err)
					for k, v := range dangerous {
						_ = s.Setenv(k, v)
					}
					must(t, s.Setenv("AGENTBE_PLAIN", "plain-value"))
					if tc.pty {
						must(t, s.RequestPty("xterm", 24, 200, gossh.TerminalModes{}))
					}
					var out syncbuf.Buffer
					s.Stdout, s.Stderr = &out, &out
					const probe = "env | sort; echo; echo EN''D"
					if tc.shell {
						s.Stdin = strings.NewReader(probe + "\nexit\n")
						must(t, s.Shell())
					} else {
						must(t, s.Start(probe))
					}
					_ = s.Wait()
					s.Close()
					got := out.String()
					if !strings.Contains(got, "END") || !strings.Contains(got, "AGENTBE_PLAIN=plain-value") {
						t.Errorf("%s %s: the probe did not run, or the plain name is missing:\n%s", transport, tc.name, got)
					}
					for _, ran := range []string{"HOOK-RAN", "PROMPT-RAN", "PS4-RAN"} {
						if strings.Contains(got, ran) {
							t.Errorf("%s %s: %s: code named by an env request ran:\n%s", transport, tc.name, ran, got)
						}
					}
					lines := map[string]bool{}
					for _, l := range strings.Split(got, "\n") {
						lines[strings.TrimRight(l, "\r")] = true
					}
					for k, v := range dangerous {
						if lines[k+"="+v] {
							t.Errorf("%s %s: %s=%s reached the command:\n%s", transport, tc.name, k, v, got)
						}
					}
				}
				// A function import's name is no variable name: the
				// command is refused whole and nothing runs.
				s, err := cl.NewSession()
				must(t, err)
				must(t, s.Setenv("BASH_FUNC_echo%%", "() { builtin printf 'FUNC''-RAN\\n'; }"))
				out, err := s.CombinedOutput("echo EN''D")
				s.Close()
				var ee *gossh.ExitError
				if !errors.As(err, &ee) || ee.ExitStatus() != 126 || strings.Contains(string(out), "END") || strings.Contains(string(out), "FUNC-RAN") {
					t.Errorf("%s: BASH_FUNC_echo%%%%: %v %q; want exit 126 and nothing run", transport, err, out)
				}
			}
		})
	}
}

// TestAttackSSHDescriptors: a command of an SSH session, in bwrap and in
// landlock mode, over both transports, exec or shell, on pipes or a pty,
// holds its 0, 1 and 2 (the pipes or the pty) and nothing of the daemon's:
// no listening socket, no SSH connection, no host key, no token file, no
// other session's pipe. What the test binary's own launcher left open is
// not the daemon's (main marks it close-on-exec: daemon/fds.go) and is
// passed over.
func TestAttackSSHDescriptors(t *testing.T) {
	inherited := map[string]bool{}
	for fd := 3; fd < 1024; fd++ {
		if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
			inherited[strconv.Itoa(fd)] = true
		}
	}
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d := startIsolated(t, mode, nil)
			clients := d.clients(t)
			// Another session holds a command, so that its pipes exist.
			other, err := clients["ws"].NewSession()
			must(t, err)
			defer other.Close()
			must(t, other.Start("sleep 60"))
			for transport, cl := range clients {
				for _, tc := range []struct {
					name       string
					pty, shell bool
				}{{"exec", false, false}, {"exec on a pty", true, false}, {"shell on pipes", false, true}, {"shell on a pty", true, true}} {
					s, err := cl.NewSession()
					must(t, err)
					if tc.pty {
						must(t, s.RequestPty("xterm", 24, 200, gossh.TerminalModes{}))
					}
					var out syncbuf.Buffer
					s.Stdout, s.Stderr = &out, &out
					const probe = "echo FD''S; ls -l /proc/self/fd/; echo EN''D"
					if tc.shell {
						s.Stdin = strings.NewReader(probe + "\nexit\n")
						must(t, s.Shell())
					} else {
						must(t, s.Start(probe))
					}
					_ = s.Wait()
					s.Close()
					got := out.String()
					_, listing, _ := strings.Cut(got, "FDS")
					listing, _, ok := strings.Cut(listing, "END")
					if !ok {
						t.Fatalf("%s %s: no listing:\n%s", transport, tc.name, got)
					}
					std := 0
					for _, l := range strings.Split(listing, "\n") {
						f := strings.Fields(l)
						if len(f) < 11 || f[9] != "->" {
							continue
						}
						fd, target := f[8], strings.Join(f[10:], " ")
						switch {
						case fd == "0" || fd == "1" || fd == "2":
							std++
							if !strings.HasPrefix(target, "pipe:") && !strings.HasPrefix(target, "'pipe:") && !strings.HasPrefix(target, "/dev/") {
								t.Errorf("%s %s: fd %s is %s", transport, tc.name, fd, target)
							}
						case strings.HasPrefix(target, "/proc/") && strings.HasSuffix(target, "/fd"):
							// ls's own listing
						case inherited[fd]:
						default:
							t.Errorf("%s %s: the command holds fd %s -> %s", transport, tc.name, fd, target)
						}
					}
					if std != 3 {
						t.Errorf("%s %s: %d of the descriptors 0, 1, 2 listed:\n%s", transport, tc.name, std, got)
					}
				}
			}
		})
	}
}

// ptmxHeld counts the pty masters this process (the daemon) holds open.
func ptmxHeld() int {
	n := 0
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && (l == "/dev/ptmx" || l == "/dev/pts/ptmx") {
			n++
		}
	}
	return n
}

// TestAttackSSHPtysBounded: in bwrap and in landlock mode, over both
// transports, shells on ptys count against --exec-max-concurrent (2 here),
// so the ptys the daemon allocates are bounded by it: a third shell is
// refused (exit 126, naming the flag) and no third pty is opened; a shell
// that exits 3 is reported so; a channel
// closed under a running shell gives its pty back; in the end the daemon
// holds none.
func TestAttackSSHPtysBounded(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d := startIsolated(t, mode, func(c *config.Config) { c.ExecMaxConcurrent = 2 })
			base := ptmxHeld()
			for transport, cl := range d.clients(t) {
				var held []*gossh.Session
				var stdins []io.WriteCloser
				for range 2 {
					s, err := cl.NewSession()
					must(t, err)
					must(t, s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}))
					var out syncbuf.Buffer
					s.Stdout, s.Stderr = &out, &out
					in, err := s.StdinPipe()
					must(t, err)
					must(t, s.Shell())
					_, err = io.WriteString(in, "echo RE''ADY\n")
					must(t, err)
					waitFor(t, "the shell", func() bool { return strings.Contains(out.String(), "READY") })
					held, stdins = append(held, s), append(stdins, in)
				}
				if n := ptmxHeld() - base; n != 2 {
					t.Errorf("%s: the daemon holds %d ptys for 2 shells", transport, n)
				}
				s, err := cl.NewSession()
				must(t, err)
				must(t, s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}))
				var third syncbuf.Buffer
				s.Stdout, s.Stderr = &third, &third
				must(t, s.Shell())
				err = s.Wait()
				s.Close()
				out := third.String()
				var ee *gossh.ExitError
				if !errors.As(err, &ee) || ee.ExitStatus() != 126 || !strings.Contains(string(out), "--exec-max-concurrent") {
					t.Errorf("%s: a third pty shell: %v %q; want exit 126 naming --exec-max-concurrent", transport, err, out)
				}
				if n := ptmxHeld() - base; n != 2 {
					t.Errorf("%s: the daemon holds %d ptys after the refusal", transport, n)
				}
				// The first shell is told to exit 3, and the client hears 3.
				_, err = io.WriteString(stdins[0], "exit 3\n")
				must(t, err)
				if err := held[0].Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 3 || ee.Signal() != "" {
					t.Errorf("%s: a shell that exits 3: %v", transport, err)
				}
				held[0].Close()
				// The second is closed under its running shell.
				held[1].Close()
				waitFor(t, "the ptys given back", func() bool { return ptmxHeld() == base })
			}
		})
	}
}

// ioctlProbe tries the terminal ioctls an attacker reaches for, on fd 0
// and on /dev/tty, and prints name=ok or name=<errno name> for each.
const ioctlProbe = `import errno, fcntl, os, struct, termios
def t(name, f):
    try:
        f()
        print(name + "=ok")
    except OSError as e:
        print(name + "=" + errno.errorcode.get(e.errno, str(e.errno)))
t("devtty", lambda: os.close(os.open("/dev/tty", os.O_RDWR)))
t("TIOCSTI", lambda: fcntl.ioctl(0, termios.TIOCSTI, b" "))
t("TIOCSETD", lambda: fcntl.ioctl(0, termios.TIOCSETD, struct.pack("i", 1)))
t("TIOCLINUX", lambda: fcntl.ioctl(0, 0x541C, bytes([12])))
t("TIOCSCTTY", lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 1))
print("PROBE" + "-END")
`

// TestAttackSSHPtyIoctls: in bwrap and landlock mode, a command on pipes
// has no terminal (/dev/tty gives ENXIO; TIOCSTI, TIOCSETD, TIOCLINUX,
// TIOCSCTTY fail); on a pty, TIOCSETD (a line discipline) and TIOCLINUX
// fail, and TIOCSTI is refused by landlock's filter and works under bwrap
// only on the command's own pty, which nothing else reads.
func TestAttackSSHPtyIoctls(t *testing.T) {
	for _, mode := range []string{"bwrap", "landlock"} {
		t.Run(mode, func(t *testing.T) {
			d := startIsolated(t, mode, nil)
			must(t, os.WriteFile(filepath.Join(d.c.Root, "probe.py"), []byte(ioctlProbe), 0o644))
			for transport, cl := range d.clients(t) {
				for _, pty := range []bool{false, true} {
					s, err := cl.NewSession()
					must(t, err)
					if pty {
						must(t, s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}))
					}
					out, _ := s.CombinedOutput("/usr/bin/python3 probe.py")
					s.Close()
					got := map[string]string{}
					for _, l := range strings.Split(string(out), "\n") {
						if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
							got[k] = v
						}
					}
					if !strings.Contains(string(out), "PROBE-END") {
						t.Fatalf("%s pty=%v: the probe did not run: %q", transport, pty, out)
					}
					for _, name := range []string{"TIOCSETD", "TIOCLINUX"} {
						if got[name] == "ok" {
							t.Errorf("%s pty=%v: %s succeeded", transport, pty, name)
						}
					}
					if !pty {
						if got["devtty"] != "ENXIO" || got["TIOCSTI"] == "ok" || got["TIOCSCTTY"] == "ok" {
							t.Errorf("%s on pipes: a terminal was reached: %q", transport, out)
						}
						continue
					}
					if mode == "landlock" && got["TIOCSTI"] != "EPERM" {
						t.Errorf("%s on a pty: TIOCSTI %s, want EPERM (seccomp)", transport, got["TIOCSTI"])
					}
				}
			}
		})
	}
}

//go:build linux

package sandbox

import (
	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// workspace returns a fresh real (symlink-free) directory.
func workspace(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func needBwrap(t testing.TB) {
	t.Helper()
	testenv.Bwrap(t)
}

// newExec builds an executor in mode over a fresh workspace; Close runs at
// cleanup.
func newExec(t *testing.T, mode Mode, mod ...func(*Config)) (Executor, string) {
	t.Helper()
	if mode == ModeBwrap {
		needBwrap(t)
	}
	cfg := Config{Mode: mode, WorkspaceRoot: workspace(t)}
	for _, m := range mod {
		m(&cfg)
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", mode, err)
	}
	t.Cleanup(func() { e.Close() })
	return e, cfg.WorkspaceRoot
}

func run(t *testing.T, e Executor, req Request) Result {
	t.Helper()
	res, err := e.Run(context.Background(), req)
	if err != nil {
		t.Fatalf("Run(%q): %v", req.Command, err)
	}
	return res
}

var allModes = []Mode{ModeSoftware, ModeBwrap, ModeLandlock, ModeNone}

func TestRunBasics(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			e, ws := newExec(t, mode)
			if e.Mode() != mode || e.Reason() == "" {
				t.Fatalf("Mode %s Reason %q", e.Mode(), e.Reason())
			}
			if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			tests := []struct {
				name, cmd, dir string
				env            map[string]string
				out, errOut    string
				code           int
			}{
				{"stdout", "echo hello", "", nil, "hello\n", "", 0},
				{"stderr and code", "echo oops >&2; exit 3", "", nil, "", "oops\n", 3},
				{"home is cwd", `echo "$HOME $PWD"; pwd`, "", nil, ws + " " + ws + "\n" + ws + "\n", "", 0},
				{"dir", `echo "$HOME"; pwd`, filepath.Join(ws, "sub"), nil, filepath.Join(ws, "sub") + "\n" + filepath.Join(ws, "sub") + "\n", "", 0},
				{"per-call env", `echo "$GREETING"`, "", map[string]string{"GREETING": "hi there"}, "hi there\n", "", 0},
				{"HOME cannot be overridden", `echo "$HOME"`, "", map[string]string{"HOME": "/"}, ws + "\n", "", 0},
				{"absolute cd like the clients", fmt.Sprintf(`HOME='%s' K='v' cd "%s" && pwd && echo $K`, ws, ws), "", nil, ws + "\n\n", "", 0},
				{"python client shape", fmt.Sprintf(`cd %s && HOME=%s K=v sh -c 'echo $K'`, ws, ws), "", nil, "v\n", "", 0},
				{"locale", `echo "$LANG $LC_ALL"`, "", nil, "C.UTF-8 C.UTF-8\n", "", 0},
				{"signal exit", `kill -TERM $$`, "", nil, "", "", 143},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					res := run(t, e, Request{Command: tc.cmd, Dir: tc.dir, Env: tc.env})
					if string(res.Stdout) != tc.out || string(res.Stderr) != tc.errOut || res.ExitCode != tc.code {
						t.Fatalf("got stdout %q stderr %q code %d; want %q %q %d", res.Stdout, res.Stderr, res.ExitCode, tc.out, tc.errOut, tc.code)
					}
					if res.StdoutSize != int64(len(tc.out)) || res.TimedOut || res.Duration <= 0 {
						t.Fatalf("sizes/flags wrong: %+v", res)
					}
				})
			}
		})
	}
}

func TestRunStdin(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	res := run(t, e, Request{Command: "tr a-z A-Z", Stdin: strings.NewReader("shout\n")})
	if string(res.Stdout) != "SHOUT\n" {
		t.Fatalf("got %q", res.Stdout)
	}
	res = run(t, e, Request{Command: "cat; echo end"}) // no Stdin: empty input
	if string(res.Stdout) != "end\n" {
		t.Fatalf("got %q", res.Stdout)
	}
}

// TestBwrapProbeFailure runs New against a fake bwrap that fails like one
// in a container without user namespaces.
func TestBwrapProbeFailure(t *testing.T) {
	dir := t.TempDir()
	fake := "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "bwrap"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	_, err := New(Config{Mode: ModeBwrap, WorkspaceRoot: workspace(t)})
	if !errcode.Is(err, errcode.InvalidConfiguration) || !strings.Contains(err.Error(), "isolation mode bwrap cannot work: user namespaces are unavailable") ||
		!strings.Contains(err.Error(), "No permissions to creating new namespace") {
		t.Fatalf("got %v", err)
	}
	e, _ := newExec(t, ModeAuto)
	if e.Mode() != ModeLandlock || !strings.Contains(e.Reason(), "user namespaces are unavailable") ||
		!strings.Contains(e.Reason(), "landlock ABI") {
		t.Fatalf("auto chose %s (%s)", e.Mode(), e.Reason())
	}
	// Without Landlock too, auto ends in software mode and says why.
	withoutLandlock(t)
	e, _ = newExec(t, ModeAuto)
	if e.Mode() != ModeSoftware || !strings.Contains(e.Reason(), "user namespaces are unavailable") ||
		!strings.Contains(e.Reason(), "landlock unusable (the kernel has no Landlock") || !strings.Contains(e.Reason(), "seccomp filter on") {
		t.Fatalf("auto chose %s (%s)", e.Mode(), e.Reason())
	}
}

// withoutLandlock makes New see a kernel without Landlock for the rest of
// the test.
func withoutLandlock(t *testing.T) {
	saved := landlockABI
	landlockABI = func() int { return 0 }
	t.Cleanup(func() { landlockABI = saved })
}

func TestRunSignalName(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	res := run(t, e, Request{Command: `kill -KILL $$`})
	if res.ExitCode != 137 || res.Signal != "KILL" {
		t.Fatalf("got code %d signal %q, want 137 KILL", res.ExitCode, res.Signal)
	}
}

func TestRunEnvironment(t *testing.T) {
	const token = "s3cret-token-value"
	t.Setenv("AGENTBE_TOKEN", token) // the daemon's own environment
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode, func(c *Config) {
				c.Secrets = clip.NewSecrets(token)
				c.Env = map[string]string{"BASE_VAR": "base", "LEAK": "x" + token}
			})
			res := run(t, e, Request{Command: "env", Env: map[string]string{
				"CALL_VAR": "call", "LD_PRELOAD": "/tmp/evil.so", "BASH_ENV": "/tmp/x", "IFS": "x",
				"BASH_FUNC_ls": "() { sudo; }", "ALSO_LEAK": token,
			}})
			env := string(res.Stdout)
			if strings.Contains(env, token) {
				t.Fatalf("the token reached the child:\n%s", env)
			}
			for _, want := range []string{"BASE_VAR=base", "CALL_VAR=call", "PATH=" + basePath, "LANG=C.UTF-8"} {
				if !strings.Contains(env, want+"\n") {
					t.Errorf("env lacks %s:\n%s", want, env)
				}
			}
			for _, bad := range []string{"LD_PRELOAD", "BASH_ENV", "IFS=", "AGENTBE_TOKEN", "BASH_FUNC"} {
				if strings.Contains(env, bad) {
					t.Errorf("env has %s:\n%s", bad, env)
				}
			}
		})
	}
}

func TestRunBadEnvName(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	for _, name := range []string{"A=B", "1X", "", "X Y"} {
		_, err := e.Run(context.Background(), Request{Command: "true", Env: map[string]string{name: "v"}})
		var ee *errcode.Error
		if !errors.As(err, &ee) || ee.Code != errcode.InvalidArgument || !strings.Contains(ee.Msg, fmt.Sprintf("%q", name)) {
			t.Errorf("env name %q: got %v, want INVALID_ARGUMENT naming it", name, err)
		}
	}
}

func TestRunRequestErrors(t *testing.T) {
	e, ws := newExec(t, ModeSoftware)
	tests := []struct {
		name string
		req  Request
		code errcode.Code
		msg  string
	}{
		{"empty", Request{Command: "  \n"}, errcode.EmptyCommand, "empty command"},
		{"relative dir", Request{Command: "ls", Dir: "sub"}, errcode.InvalidArgument, "must be an absolute path"},
		{"dir outside", Request{Command: "ls", Dir: "/etc"}, errcode.PathEscapeAttempt, "outside " + ws},
		{"dir prefix trick", Request{Command: "ls", Dir: ws + "2"}, errcode.PathEscapeAttempt, "outside"},
		{"boundary outside", Request{Command: "ls", Boundary: "/"}, errcode.PathEscapeAttempt, "outside the workspace root"},
		{"dir outside boundary", Request{Command: "ls", Boundary: ws + "/a", Dir: ws}, errcode.PathEscapeAttempt, "outside " + ws + "/a"},
		{"dangerous", Request{Command: "s\"\"udo id"}, errcode.DangerousOperation, policy.RulePrivilege},
		{"unjudgeable", Request{Command: "$(echo sudo) id"}, errcode.UnsafeCommand, policy.RuleUnjudgeable},
		{"escape", Request{Command: "cd .. && ls"}, errcode.DangerousOperation, policy.RuleEscape},
		{"too large", Request{Command: "echo " + strings.Repeat("x", 128<<10)}, errcode.TooLarge, "the kernel passes at most 131071"},
		{"missing dir", Request{Command: "ls", Dir: ws + "/nope"}, errcode.NotFound, "working directory does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Run(context.Background(), tc.req)
			var ee *errcode.Error
			if !errors.As(err, &ee) || ee.Code != tc.code || !strings.Contains(ee.Error(), tc.msg) {
				t.Fatalf("got %v, want %s containing %q", err, tc.code, tc.msg)
			}
			if (tc.code == errcode.DangerousOperation || tc.code == errcode.UnsafeCommand) && ee.Command != tc.req.Command {
				t.Fatalf("error names command %q, want %q", ee.Command, tc.req.Command)
			}
		})
	}
}

func TestModeNoneHasNoPolicy(t *testing.T) {
	e, _ := newExec(t, ModeNone)
	res := run(t, e, Request{Command: `a=echo; $a trusted`})
	if string(res.Stdout) != "trusted\n" {
		t.Fatalf("got %q", res.Stdout)
	}
}

func TestPolicyAllowPatternsAndDisable(t *testing.T) {
	e, _ := newExec(t, ModeSoftware, func(c *Config) { c.Policy.Allow = []string{`^nc -h$`} })
	if _, err := e.Run(context.Background(), Request{Command: "nc -h; nc -l 1"}); !errcode.Is(err, errcode.DangerousOperation) {
		t.Fatalf("an allow pattern must not exempt the whole line: %v", err)
	}
	p, err := policy.New(`^nc -h$`)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check("nc -h", "/ws"); err != nil {
		t.Fatalf("allow pattern ignored: %v", err)
	}
	e2, _ := newExec(t, ModeSoftware, func(c *Config) { c.Policy.Disabled = true })
	res := run(t, e2, Request{Command: `a=echo; $a off`})
	if string(res.Stdout) != "off\n" {
		t.Fatalf("disabled policy still judged: %q", res.Stdout)
	}
	if _, err := New(Config{Mode: ModeSoftware, WorkspaceRoot: workspace(t), Policy: PolicyConfig{Allow: []string{"("}}}); err == nil || !strings.Contains(err.Error(), `invalid policy allow pattern "("`) {
		t.Fatalf("bad allow pattern: %v", err)
	}
}

// leftovers lists processes whose command line contains marker.
func leftovers(marker string) []string {
	var out []string
	for _, p := range scanProc() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(marker)) {
			out = append(out, fmt.Sprintf("%d %q", p.pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
		}
	}
	return out
}

// waitGone polls until no process carries marker (killed processes take a
// moment to be reaped by init); it fails after a generous bound.
func waitGone(t *testing.T, marker string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := leftovers(marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes left behind: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRunTimeoutKillsTree(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			marker := fmt.Sprintf("10%d%d", os.Getpid(), len(mode))
			cmd := fmt.Sprintf(`echo started; sh -c 'sleep %s & sleep %s'; setsid sleep %s & sleep %s`, marker, marker, marker, marker)
			// The limit leaves a loaded machine time to start the sandbox
			// and echo: the output before the kill is part of the claim.
			res := run(t, e, Request{Command: cmd, Timeout: 3 * time.Second})
			if !res.TimedOut || res.ExitCode != 137 || res.Signal != "KILL" {
				t.Fatalf("got %+v, want a timed-out KILL", res)
			}
			if string(res.Stdout) != "started\n" {
				t.Fatalf("partial output %q, want %q", res.Stdout, "started\n")
			}
			waitGone(t, "sleep "+marker)
		})
	}
}

func TestRunBackgroundJobEndsWithShell(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			marker := fmt.Sprintf("20%d%d", os.Getpid(), len(mode))
			res := run(t, e, Request{Command: "sleep " + marker + " & echo bye", Timeout: time.Minute})
			if res.TimedOut || string(res.Stdout) != "bye\n" {
				t.Fatalf("got %+v", res)
			}
			waitGone(t, "sleep "+marker)
		})
	}
}

func TestRunCancel(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	res, err := e.Run(ctx, Request{Command: "echo x; sleep 30"})
	if !errors.Is(err, context.Canceled) || res.TimedOut || string(res.Stdout) != "x\n" {
		t.Fatalf("got %+v, %v; want partial output and context.Canceled", res, err)
	}
	if _, err := e.Run(ctx, Request{Command: "true"}); !errcode.Is(err, errcode.ExecError) {
		t.Fatalf("run with a done context: %v", err)
	}
}

func TestRunOutputTruncation(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	// 10000 lines "00001".."10000" = 60000 bytes on stdout, 3 bytes stderr.
	res := run(t, e, Request{Command: `seq -w 1 10000; echo err >&2`, OutputLimit: 1000})
	if res.StdoutSize != 60000 || len(res.Stdout) != 1000 {
		t.Fatalf("size %d kept %d, want 60000 and 1000", res.StdoutSize, len(res.Stdout))
	}
	if !bytes.HasPrefix(res.Stdout, []byte("00001\n00002\n")) || !bytes.HasSuffix(res.Stdout, []byte("09999\n10000\n")) {
		t.Fatalf("head/tail wrong: %q ... %q", res.Stdout[:20], res.Stdout[980:])
	}
	if string(res.Stderr) != "err\n" || res.StderrSize != 4 {
		t.Fatalf("stderr %q %d", res.Stderr, res.StderrSize)
	}
	notice := TruncationNotice(1000, 60000)
	if notice != "\n[... output truncated: 59000 of 60000 bytes omitted; kept the first 500 and last 500 bytes ...]\n" {
		t.Fatalf("notice %q", notice)
	}
	shown := WithTruncationNotice(res.Stdout, res.StdoutSize)
	if string(shown) != string(res.Stdout[:500])+notice+string(res.Stdout[500:]) {
		t.Fatalf("notice misplaced:\n%s", shown)
	}
	if got := WithTruncationNotice([]byte("abc"), 3); string(got) != "abc" {
		t.Fatalf("untruncated output changed: %q", got)
	}
}

func TestStartPipes(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			inR, inW := io.Pipe()
			var out, errOut syncbuf.Buffer
			p, err := e.Start(context.Background(), Request{Command: "cat; echo done >&2; exit 7"}, Stdio{Stdin: inR, Stdout: &out, Stderr: &errOut})
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(inW, "line one\n")
			inW.Close() // EOF from the reader ends the child's stdin
			st, err := p.Wait()
			if err != nil || st.Code != 7 || out.String() != "line one\n" || errOut.String() != "done\n" {
				t.Fatalf("status %+v err %v out %q err %q", st, err, out.String(), errOut.String())
			}
			if err := p.Resize(80, 24); err != nil {
				t.Fatalf("Resize without a pty: %v", err)
			}
		})
	}
}

// slowWriter stalls on its first write longer than ioGrace, like an SSH
// client that has stopped reading with a full window.
type slowWriter struct {
	once sync.Once
	n    int64
	mu   sync.Mutex
}

func (w *slowWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { time.Sleep(3 * ioGrace) })
	w.mu.Lock()
	w.n += int64(len(p))
	w.mu.Unlock()
	return len(p), nil
}

func TestStartSlowReaderGetsAllOutput(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			w := &slowWriter{}
			p, err := e.Start(context.Background(), Request{Command: "head -c 300000 /dev/zero"}, Stdio{Stdout: w})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := p.Wait(); err != nil || st.Code != 0 || w.n != 300000 {
				t.Fatalf("status %+v err %v, got %d of 300000 bytes", st, err, w.n)
			}
		})
	}
}

func TestStartCloseStdin(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	inR, inW := io.Pipe() // a reader that never ends by itself
	defer inW.Close()
	var out syncbuf.Buffer
	p, err := e.Start(context.Background(), Request{Command: "cat; echo eof-seen"}, Stdio{Stdin: inR, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("second CloseStdin: %v", err)
	}
	if st, err := p.Wait(); err != nil || st.Code != 0 || out.String() != "eof-seen\n" {
		t.Fatalf("status %+v err %v out %q", st, err, out.String())
	}
}

func TestStartSignal(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			var out syncbuf.Buffer
			p, err := e.Start(context.Background(), Request{Command: `trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.05; done`}, Stdio{Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, &out, "ready")
			if err := p.Signal("BOGUS"); !errcode.Is(err, errcode.InvalidArgument) {
				t.Fatalf("unknown signal: %v", err)
			}
			if err := p.Signal("INT"); err != nil {
				t.Fatal(err)
			}
			st, err := p.Wait()
			if err != nil || st.Code != 5 || !strings.Contains(out.String(), "got-int") {
				t.Fatalf("status %+v err %v out %q", st, err, out.String())
			}
		})
	}
}

func TestStartPty(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			var out syncbuf.Buffer
			inR, inW := io.Pipe()
			defer inW.Close()
			p, err := e.Start(context.Background(), Request{Command: `test -t 0 && echo tty-yes; echo "term=$TERM"; read x; stty size`,
				Pty: &Pty{Term: "xterm-256color", Cols: 100, Rows: 40}}, Stdio{Stdin: inR, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, &out, "term=")
			if err := p.Resize(120, 50); err != nil {
				t.Fatal(err)
			}
			io.WriteString(inW, "go\n")
			st, err := p.Wait()
			if err != nil || st.Code != 0 {
				t.Fatalf("status %+v err %v", st, err)
			}
			got := out.String()
			for _, want := range []string{"tty-yes", "term=xterm-256color", "50 120"} {
				if !strings.Contains(got, want) {
					t.Fatalf("pty output lacks %q:\n%q", want, got)
				}
			}
		})
	}
}

func TestStartInteractiveShell(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	if _, err := e.Start(context.Background(), Request{Pty: &Pty{}}, Stdio{}); !errcode.Is(err, errcode.UnsafeCommand) {
		t.Fatalf("software mode must refuse an unjudgeable shell: %v", err)
	}
	e2, _ := newExec(t, ModeBwrap)
	var out syncbuf.Buffer
	inR, inW := io.Pipe()
	p, err := e2.Start(context.Background(), Request{}, Stdio{Stdin: inR, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(inW, "echo from-stdin\nexit 4\n")
	st, err := p.Wait()
	inW.Close()
	if err != nil || st.Code != 4 || out.String() != "from-stdin\n" {
		t.Fatalf("status %+v err %v out %q", st, err, out.String())
	}
}

func TestStartTimeoutAndClose(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	p, err := e.Start(context.Background(), Request{Command: "sleep 30", Timeout: 200 * time.Millisecond}, Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := p.Wait(); !st.TimedOut || st.Signal != "KILL" {
		t.Fatalf("status %+v, want timed out", st)
	}

	e2, _ := newExec(t, ModeSoftware)
	p2, err := e2.Start(context.Background(), Request{Command: "sleep 30"}, Stdio{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a Run in flight is killed by Close too
		defer wg.Done()
		res, _ := e2.Run(context.Background(), Request{Command: "sleep 31"})
		if res.ExitCode != 137 {
			t.Errorf("Run during Close: %+v", res)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e2.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if st, _ := p2.Wait(); st.Signal != "KILL" {
		t.Fatalf("Close did not kill the started process: %+v", st)
	}
	wg.Wait()
	if _, err := e2.Run(context.Background(), Request{Command: "true"}); !errcode.Is(err, errcode.ExecError) {
		t.Fatalf("Run after Close: %v", err)
	}
}

func TestRlimits(t *testing.T) {
	for _, shell := range []Shell{ShellBash, ShellSh} {
		t.Run(string(shell), func(t *testing.T) {
			e, ws := newExec(t, ModeSoftware, func(c *Config) {
				c.Shell = shell
				c.Rlimits = Rlimits{FileSize: 4096, CPUSeconds: 30, AddressSpace: 4 << 30, Processes: 4096}
			})
			res := run(t, e, Request{Command: `trap '' XFSZ; head -c 100000 /dev/zero > big; ulimit -f`})
			fi, err := os.Stat(filepath.Join(ws, "big"))
			if err != nil || fi.Size() > 4096 {
				t.Fatalf("file size limit not applied: %v %v (%q %q)", fi.Size(), err, res.Stdout, res.Stderr)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	ws := workspace(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  Config
		msg  string
	}{
		{"bad mode", Config{Mode: "jail", WorkspaceRoot: ws}, `invalid isolation mode "jail": want auto, bwrap, landlock, software or none`},
		{"bad shell", Config{Shell: "fish", WorkspaceRoot: ws}, `invalid shell "fish": want auto, bash or sh`},
		{"no root", Config{}, `workspace root "" must be an absolute path`},
		{"relative root", Config{WorkspaceRoot: "ws"}, `workspace root "ws" must be an absolute path`},
		{"symlinked root", Config{WorkspaceRoot: link}, "must be a real path"},
		{"missing root", Config{WorkspaceRoot: ws + "/missing"}, "no such file or directory"},
		{"negative", Config{WorkspaceRoot: ws, OutputLimit: -1}, "must not be negative"},
		{"negative concurrency", Config{WorkspaceRoot: ws, MaxConcurrent: -1}, "--exec-max-concurrent -1 must not be negative"},
		{"root is /", Config{WorkspaceRoot: "/"}, "workspace root must not be /"},
		{"unknown run-as", Config{WorkspaceRoot: ws, RunAs: "no-such-user-agentbe"}, `run-as user "no-such-user-agentbe"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if !errcode.Is(err, errcode.InvalidConfiguration) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want INVALID_CONFIGURATION containing %q", err, tc.msg)
			}
		})
	}
}

func TestParseModeShell(t *testing.T) {
	for in, want := range map[string]Mode{"": ModeAuto, "auto": ModeAuto, "BWRAP": ModeBwrap, "Landlock": ModeLandlock, " software ": ModeSoftware, "none": ModeNone} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseMode("docker"); err == nil || err.Error() != `invalid isolation mode "docker": want auto, bwrap, landlock, software or none` {
		t.Errorf("ParseMode(docker): %v", err)
	}
	for in, want := range map[string]Shell{"": ShellAuto, "auto": ShellAuto, "bash": ShellBash, "sh": ShellSh} {
		if got, err := ParseShell(in); err != nil || got != want {
			t.Errorf("ParseShell(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseShell("zsh"); err == nil || err.Error() != `invalid shell "zsh": want auto, bash or sh` {
		t.Errorf("ParseShell(zsh): %v", err)
	}
}

func TestAutoAndMissingBwrap(t *testing.T) {
	needBwrap(t)
	e, _ := newExec(t, ModeAuto)
	if e.Mode() != ModeBwrap || !strings.Contains(e.Reason(), "probe succeeded") {
		t.Fatalf("auto chose %s (%s)", e.Mode(), e.Reason())
	}
	t.Setenv("PATH", t.TempDir()) // no bwrap in PATH
	if _, err := New(Config{Mode: ModeBwrap, WorkspaceRoot: workspace(t)}); !errcode.Is(err, errcode.InvalidConfiguration) ||
		!strings.Contains(err.Error(), "bwrap is not installed") {
		t.Fatalf("explicit bwrap without bwrap: %v", err)
	}
	e2, _ := newExec(t, ModeAuto)
	if e2.Mode() != ModeLandlock || !strings.Contains(e2.Reason(), "bwrap is not installed") {
		t.Fatalf("auto without bwrap chose %s (%s)", e2.Mode(), e2.Reason())
	}
	withoutLandlock(t)
	if _, err := New(Config{Mode: ModeLandlock, WorkspaceRoot: workspace(t)}); !errcode.Is(err, errcode.InvalidConfiguration) ||
		!strings.Contains(err.Error(), "isolation mode landlock cannot work: the kernel has no Landlock") {
		t.Fatalf("explicit landlock without Landlock: %v", err)
	}
	e3, _ := newExec(t, ModeAuto)
	if e3.Mode() != ModeSoftware || !strings.Contains(e3.Reason(), "bwrap is not installed") {
		t.Fatalf("auto without bwrap or Landlock chose %s (%s)", e3.Mode(), e3.Reason())
	}
}

func waitFor(t *testing.T, b *syncbuf.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output never showed %q: %q", want, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestParentThreadExit: a caller whose OS thread dies right after starting
// a command (a goroutine that exits while locked to its thread) must not
// take the command with it, although parent-death signals are per thread.
func TestParentThreadExit(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			var out syncbuf.Buffer
			started := make(chan Process)
			go func() {
				runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
				p, err := e.Start(context.Background(), Request{Command: "sleep 0.5; echo alive"}, Stdio{Stdout: &out})
				if err != nil {
					t.Error(err)
				}
				started <- p
			}()
			p := <-started
			if p == nil {
				return
			}
			st, err := p.Wait()
			if err != nil || st.Code != 0 || out.String() != "alive\n" {
				t.Fatalf("status %+v err %v out %q: the command died with its caller's thread", st, err, out.String())
			}
		})
	}
}

// TestInteractiveShellLeavesNoHistory: an interactive shell on a pty (HOME
// is the workspace) does not write .bash_history into the workspace.
func TestInteractiveShellLeavesNoHistory(t *testing.T) {
	e, root := newExec(t, ModeBwrap)
	var out syncbuf.Buffer
	inR, inW := io.Pipe()
	defer inW.Close()
	p, err := e.Start(context.Background(), Request{Pty: &Pty{Cols: 80, Rows: 24}}, Stdio{Stdin: inR, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(inW, "echo typed-$((6*7))\nexit 3\n")
	if st, err := p.Wait(); err != nil || st.Code != 3 || !strings.Contains(out.String(), "typed-42") {
		t.Fatalf("status %+v err %v out %q", st, err, out.String())
	}
	if _, err := os.Stat(filepath.Join(root, ".bash_history")); err == nil {
		t.Fatal("the interactive shell left .bash_history in the workspace")
	}
}

// TestRunMergeAndOnOutput: MergeStderr interleaves the two streams in
// stdout as they were written, and OnOutput sees every chunk, in order per
// stream, before Run returns, in every mode.
func TestRunMergeAndOnOutput(t *testing.T) {
	for _, mode := range allModes {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			res, err := e.Run(context.Background(), Request{Command: "echo a; echo b >&2; echo c", MergeStderr: true})
			if err != nil || string(res.Stdout) != "a\nb\nc\n" || len(res.Stderr) != 0 {
				t.Fatalf("merged: %q %q %v", res.Stdout, res.Stderr, err)
			}
			var mu sync.Mutex
			seen := map[string]string{}
			res, err = e.Run(context.Background(), Request{Command: "echo one; echo two >&2; echo three",
				OnOutput: func(stream string, p []byte) {
					mu.Lock()
					seen[stream] += string(p)
					mu.Unlock()
				}})
			if err != nil || string(res.Stdout) != "one\nthree\n" || string(res.Stderr) != "two\n" {
				t.Fatalf("separate: %q %q %v", res.Stdout, res.Stderr, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if seen["stdout"] != "one\nthree\n" || seen["stderr"] != "two\n" {
				t.Fatalf("OnOutput saw %q", seen)
			}
		})
	}
}

// TestStartSignalAtOnce: a signal sent as soon as Start returns reaches
// the command in every mode. Under bwrap the command is not running yet
// then (bwrap is still setting up, its pid 1 inside the namespace takes
// no signal from outside and forwards none), and the signal waits for it.
func TestStartSignalAtOnce(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, _ := newExec(t, mode)
			p, err := e.Start(context.Background(), Request{Command: `sleep 30`}, Stdio{})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Signal("TERM"); err != nil {
				t.Fatalf("TERM at once: %v", err)
			}
			done := make(chan ExitStatus, 1)
			go func() { st, _ := p.Wait(); done <- st }()
			select {
			case st := <-done:
				// bwrap reports its command's death by a signal as
				// 128+signal.
				if st.Signal != "TERM" && !(mode == ModeBwrap && st.Code == 128+15) {
					t.Errorf("after TERM at once: %+v", st)
				}
			case <-time.After(20 * time.Second): // a hang guard; sleep 30 would still run
				p.Signal("KILL")
				<-done
				t.Fatal("a TERM sent as Start returned did not reach the command")
			}
		})
	}
}

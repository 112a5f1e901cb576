//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox/policy"
)

// directScripts are scripts and whether parseDirect accepts them, with the
// argv and cd target it must find.
var directScripts = []struct {
	script string
	ok     bool
	argv   []string
	cd     string
}{
	{script: "true", ok: true, argv: []string{"true"}},
	{script: "false", ok: true, argv: []string{"false"}},
	{script: "ls", ok: true, argv: []string{"ls"}},
	{script: "ls -la src", ok: true, argv: []string{"ls", "-la", "src"}},
	{script: "  ls\t-l  \n", ok: true, argv: []string{"ls", "-l"}},
	{script: "ls;", ok: true, argv: []string{"ls"}},
	{script: `git commit -m 'fix $HOME * ~ \n'`, ok: true, argv: []string{"git", "commit", "-m", `fix $HOME * ~ \n`}},
	{script: `grep "a b" c`, ok: true, argv: []string{"grep", "a b", "c"}},
	{script: `a"b"'c'd`, ok: true, argv: []string{"abcd"}},
	{script: `echo2 ''`, ok: true, argv: []string{"echo2", ""}},
	{script: "./build.sh --fast", ok: true, argv: []string{"./build.sh", "--fast"}},
	{script: "/usr/bin/env", ok: true, argv: []string{"/usr/bin/env"}},
	{script: "ls a=b", ok: true, argv: []string{"ls", "a=b"}},
	{script: "ls a#b", ok: true, argv: []string{"ls", "a#b"}},
	{script: "ls %:,^@+-", ok: true, argv: []string{"ls", "%:,^@+-"}},
	{script: "sh -c 'kill -KILL $$'", ok: true, argv: []string{"sh", "-c", "kill -KILL $$"}},
	// The TypeScript client's shape, with and without assignments.
	{script: `cd "/w/s" && npm test`, ok: true, argv: []string{"npm", "test"}, cd: "/w/s"},
	{script: `HOME='/w/s' cd "/w/s" && npm test`, ok: true, argv: []string{"npm", "test"}, cd: "/w/s"},
	{script: `HOME='/w/s' K='v' NODE_ENV="prod" E= cd "/w/s" && npm test`, ok: true, argv: []string{"npm", "test"}, cd: "/w/s"},
	{script: "cd sub && true", ok: true, argv: []string{"true"}, cd: "sub"},
	{script: "cd .. && ls", ok: true, argv: []string{"ls"}, cd: ".."},

	// Not one plain statement.
	{script: ""},
	{script: "   "},
	{script: "# only a comment"},
	{script: "ls # comment"},
	{script: "ls\n# comment"},
	{script: "ls; ls"},
	{script: "ls\nls"},
	{script: "ls &"},
	{script: "ls | wc"},
	{script: "ls || true"},
	{script: "! ls"},
	{script: "coproc ls"},
	{script: "(ls)"},
	{script: "{ ls; }"},
	{script: "time ls"},
	{script: "if true; then ls; fi"},
	{script: "[[ -f x ]]"},
	{script: "f() { ls; }"},
	{script: "ls > out"},
	{script: "ls 2>&1"},
	{script: "cat < in"},
	{script: "cat <<EOF\nx\nEOF"},
	{script: "cat <<< x"},
	{script: "ls 'unterminated"},
	// Words that are not plain literals.
	{script: "ls *.go"},
	{script: "ls ?"},
	{script: "ls [ab]"},
	{script: "ls a]"},
	{script: "echo2 {a,b}"},
	{script: "echo2 a{b"},
	{script: "ls ~"},
	{script: "ls ~/x"},
	{script: "ls a~b"},
	{script: `ls a\ b`},
	{script: "ls a\\\nb"},
	{script: `ls $HOME`},
	{script: `ls ${HOME}`},
	{script: `ls "$HOME"`},
	{script: `ls "a\"b"`},
	{script: "ls \"a`id`\""},
	{script: "ls `id`"},
	{script: "ls $(id)"},
	{script: "ls $((1+1))"},
	{script: `ls $'x'`},
	{script: `ls $"x"`},
	{script: "diff <(ls) x"},
	{script: "ls @(a|b)"},
	{script: "$CMD"},
	{script: "FOO=bar ls"},
	{script: "FOO=$(id) ls"},
	// Builtins and keywords.
	{script: "cd /tmp"},
	{script: "export A=1"},
	{script: "echo hi"},
	{script: "printf x"},
	{script: "kill 1"},
	{script: "exec ls"},
	{script: "command ls"},
	{script: "eval ls"},
	{script: "source x"},
	{script: ". x"},
	{script: "test -f x"},
	{script: "[ -f x ]"},
	{script: "pwd"},
	{script: "type ls"},
	{script: ":"},
	{script: "true --help"},
	{script: "false x"},
	{script: `"echo" x`},
	{script: "A=b"},
	{script: "a=b=c x"},
	{script: "'' x"},
	{script: "%1"},
	{script: "%foo bar"},
	// The cd form, not plain.
	{script: "cd && ls"},
	{script: "cd a b && ls"},
	{script: "cd - && ls"},
	{script: "cd -P x && ls"},
	{script: `cd "" && ls`},
	{script: "cd $D && ls"},
	{script: "cd ~ && ls"},
	{script: "cd x && cd y && ls"},
	{script: "cd x || ls"},
	{script: "cd x && ls > out"},
	{script: "cd x > out && ls"},
	{script: "cd x && echo hi"},
	{script: "cd x && A=1 ls"},
	{script: "CDPATH=/ cd x && ls"},
	{script: "PWD=/ cd x && ls"},
	{script: "OLDPWD=/ cd x && ls"},
	{script: "BASHOPTS=x cd x && ls"},
	{script: "POSIXLY_CORRECT=1 cd x && ls"},
	{script: "A+=1 cd x && ls"},
	{script: "A=(1) cd x && ls"},
	{script: "A=$B cd x && ls"},
	{script: "pushd x && ls"},
	{script: "ls && cd x"},
}

func TestParseDirect(t *testing.T) {
	for _, c := range directScripts {
		plan, ok := parseDirect(policy.Parse(c.script))
		if ok != c.ok {
			t.Errorf("parseDirect(%q) ok = %v, want %v", c.script, ok, c.ok)
			continue
		}
		if ok && (!reflect.DeepEqual(plan.argv, c.argv) || plan.cd != c.cd || plan.hasCd != (c.cd != "")) {
			t.Errorf("parseDirect(%q) = %q cd %q, want %q cd %q", c.script, plan.argv, plan.cd, c.argv, c.cd)
		}
	}
}

// directFixture is a workspace with a sub directory, an ELF program, a #!
// script, an executable that is neither (bash runs it as a script) and a
// non-executable file.
func directFixture(t *testing.T, root string) {
	t.Helper()
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each file and directory has the mode it is made with, whatever the
	// umask (a --run-as user runs and enters them).
	mkdir := func(p string) error {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		return os.Chmod(p, 0o755)
	}
	write := func(p string, data []byte, mode os.FileMode) error {
		if err := os.WriteFile(p, data, mode); err != nil {
			return err
		}
		return os.Chmod(p, mode)
	}
	must(mkdir(filepath.Join(root, "sub")))
	must(mkdir(filepath.Join(root, "sub", "deeper")))
	must(mkdir(filepath.Join(root, "bin")))
	elf, err := os.ReadFile("/usr/bin/env")
	must(err)
	must(write(filepath.Join(root, "bin", "myenv"), elf, 0o755))
	must(write(filepath.Join(root, "hello.sh"), []byte("#!/bin/sh\necho hello \"$@\"; echo err >&2; exit 3\n"), 0o755))
	must(write(filepath.Join(root, "plain"), []byte("echo plain script\n"), 0o755))
	must(write(filepath.Join(root, "noexec"), elf, 0o644))
	must(os.Symlink("/tmp", filepath.Join(root, "out")))
	// A `true` that is not coreutils': bash still runs its builtin.
	must(mkdir(filepath.Join(root, "fake")))
	must(write(filepath.Join(root, "fake", "true"), elf, 0o755))
	// Symlinks on PATH: to a program, to coreutils' true (whose real
	// path makes it the builtin's equal), to nothing.
	must(mkdir(filepath.Join(root, "links")))
	must(os.Symlink("../bin/myenv", filepath.Join(root, "links", "myenv")))
	must(os.Symlink("/usr/bin/true", filepath.Join(root, "links", "true")))
	must(os.Symlink("../fake/true", filepath.Join(root, "links", "faketrue")))
	must(os.Symlink("nowhere", filepath.Join(root, "links", "dangling")))
}

// TestDirectDecision is the whole decision, with the file system and the
// executor's state: what the script shape allows and what the program,
// the cd target and the environment then say.
func TestDirectDecision(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			e, root := newExec(t, mode)
			x := e.(*executor)
			directFixture(t, root)
			env, err := x.env(root, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			bw := mode == ModeBwrap
			for _, c := range []struct {
				script  string
				env     map[string]string
				ok, bwr bool // software, bwrap
				path    string
				dir     string
			}{
				{script: "true", ok: true, bwr: true, path: "/usr/bin/true"},
				{script: "env -0", ok: true, bwr: true, path: "/usr/bin/env"},
				{script: "/usr/bin/env", ok: true, bwr: true, path: "/usr/bin/env"},
				{script: "/bin/true", ok: true, bwr: true, path: "/bin/true"},
				{script: "bin/myenv", ok: true, bwr: true, path: root + "/bin/myenv"},
				{script: "sub/../bin/myenv", ok: true, bwr: true, path: root + "/sub/../bin/myenv"},
				{script: "./hello.sh", ok: true, bwr: false, path: root + "/./hello.sh"},
				{script: "cd sub && true", ok: true, bwr: true, path: "/usr/bin/true", dir: root + "/sub"},
				{script: "cd sub/deeper && ../../bin/myenv", ok: true, bwr: true, path: root + "/sub/deeper/../../bin/myenv", dir: root + "/sub/deeper"},
				{script: `HOME='` + root + `' K='v' cd "` + root + `/sub" && env`, ok: true, bwr: true, path: "/usr/bin/env", dir: root + "/sub"},
				{script: "cd . && true", ok: true, bwr: true, path: "/usr/bin/true", dir: root},
				{script: "cd /" + root + " && true"},
				{script: "env", env: map[string]string{"PATH": "/usr/nonexistent:/usr/bin"}, ok: true, bwr: true, path: "/usr/bin/env"},
				{script: "myenv", env: map[string]string{"PATH": root + "/bin:/usr/bin"}, ok: true, bwr: true, path: root + "/bin/myenv"},
				{script: "env", env: map[string]string{"PATH": "/nonexistent:/usr/bin"}, ok: true, bwr: false, path: "/usr/bin/env"},
				{script: "env", env: map[string]string{"PATH": "/usr/bin/../bin"}},
				{script: "env", env: map[string]string{"PATH": "usr/bin"}},
				{script: "env", env: map[string]string{"PATH": ":/usr/bin"}},
				{script: "env", env: map[string]string{"PATH": ""}},
				{script: "env", env: map[string]string{"PATH": "/tmp:/usr/bin"}, ok: true, bwr: false, path: "/usr/bin/env"},
				{script: "env", env: map[string]string{"SHLVL": "3"}},
				{script: "env", env: map[string]string{"OLDPWD": "/"}},
				{script: "env", env: map[string]string{"POSIXLY_CORRECT": "1"}},
				{script: "env", env: map[string]string{"BASH_XTRACEFD": "1"}},
				{script: "env", env: map[string]string{"RANDOM": "1"}},
				{script: "env", env: map[string]string{"_": "x"}},
				{script: "env", env: map[string]string{"PS1": "x"}},
				{script: "env", env: map[string]string{"LC_ALL": "en_US.UTF-8"}},
				{script: "env", env: map[string]string{"LC_ALL": ""}},
				{script: "env", env: map[string]string{"LC_ALL": "C", "LANG": "xx_YY"}, ok: true, bwr: true, path: "/usr/bin/env"},
				{script: "nosuchprogram"},
				{script: "true", env: map[string]string{"PATH": root + "/bin:/usr/bin"}, ok: true, bwr: true, path: "/usr/bin/true"},
				{script: "true", env: map[string]string{"PATH": root + "/fake:/usr/bin"}},
				{script: "myenv", env: map[string]string{"PATH": root + "/links:/usr/bin"}, ok: true, bwr: true, path: root + "/links/myenv"},
				{script: "true", env: map[string]string{"PATH": root + "/links:/usr/bin"}, ok: true, bwr: true, path: root + "/links/true"},
				{script: "links/true", ok: true, bwr: true, path: root + "/links/true"},
				{script: "links/faketrue", ok: true, bwr: true, path: root + "/links/faketrue"},
				{script: "dangling", env: map[string]string{"PATH": root + "/links:/usr/bin"}},
				{script: "links/dangling"},
				{script: "./plain"},
				{script: "./noexec"},
				{script: "./sub"},
				{script: "./missing"},
				{script: "echo hi"},
				{script: "cd missing && true"},
				{script: "cd hello.sh && true"},
				{script: "cd out && true"},
				{script: "cd /tmp && true"},
				{script: "cd / && true"},
				{script: "cd .. && true"},
				{script: "true --help"},
				{script: "ls *"},
			} {
				d, ok := x.direct(policy.Parse(c.script), root, root, mergeEnv(env, c.env))
				want := c.ok
				if bw {
					want = c.bwr
				}
				if ok != want {
					t.Errorf("direct(%q, env %v) ok = %v, want %v", c.script, c.env, ok, want)
					continue
				}
				if !ok {
					continue
				}
				dir := c.dir
				if dir == "" {
					dir = root
				}
				if d.path != c.path || d.dir != dir {
					t.Errorf("direct(%q) = path %q dir %q, want %q %q", c.script, d.path, d.dir, c.path, dir)
				}
			}

			// No fast path with rlimits (the shell's ulimit applies them),
			// with another shell, or when switched off.
			for _, mod := range []func(x *executor) func(){
				func(x *executor) func() { x.ulimit = "ulimit -f 1 || exit 126; "; return func() { x.ulimit = "" } },
				func(x *executor) func() { x.shellKind = "dash"; return func() { x.shellKind = "bash" } },
				func(x *executor) func() { x.noDirect = true; return func() { x.noDirect = false } },
			} {
				undo := mod(x)
				if _, ok := x.direct(policy.Parse("true"), root, root, env); ok {
					t.Errorf("direct path taken with ulimit %q shell %q noDirect %v", x.ulimit, x.shellKind, x.noDirect)
				}
				undo()
			}
		})
	}
}

func TestProbeDirect(t *testing.T) {
	sh, arg0, kind, err := resolveShell(ShellBash)
	if err != nil || kind != "bash" {
		t.Skip("bash is not installed")
	}
	if !probeDirect(sh, arg0) {
		t.Fatal("probeDirect: this bash does not exec in place after cd (bash < 5.1?); the fast path is off")
	}
	// A shell that forks (sh -c 'cd / && x' under dash does not decrement
	// SHLVL) fails the probe.
	if dash, err := exec.LookPath("dash"); err == nil && probeDirect(dash, "dash") {
		t.Error("probeDirect accepted dash")
	}
}

func TestDirectNotWithRlimits(t *testing.T) {
	e, root := newExec(t, ModeSoftware, func(c *Config) { c.Rlimits.FileSize = 1 << 20 })
	env, _ := e.(*executor).env(root, nil, "")
	if _, ok := e.(*executor).direct(policy.Parse("true"), root, root, env); ok {
		t.Fatal("direct path taken with rlimits configured")
	}
}

// mergeEnv is env with extra appended (later entries win, as in env()).
func mergeEnv(env []string, extra map[string]string) []string {
	out := append([]string{}, env...)
	for k, v := range extra {
		out = append(out, k+"="+v)
	}
	return out
}

// sortedLines sorts the lines of an `env` output, so the shell's and the
// direct path's environments compare as sets.
var tmpdirLine = regexp.MustCompile(`(?m)^TMPDIR=/\S*/agentbe-landlock-[^/]+/[0-9a-f]+$`)

func sortedLines(b []byte) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// bothWays builds two executors over one workspace: the fast path on and
// off.
func bothWays(t *testing.T, mode Mode) (fast, slow *executor, root string) {
	t.Helper()
	f, root := newExec(t, mode)
	s, err := New(Config{Mode: mode, WorkspaceRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	slow = s.(*executor)
	slow.noDirect = true
	return f.(*executor), slow, root
}

// TestDirectDifferential runs real commands with the fast path on and off:
// stdout, stderr, exit code, signal and the environment (as a set) must be
// the same, and the fast path must have been taken where expected.
func TestDirectDifferential(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeNone, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			fast, slow, root := bothWays(t, mode)
			directFixture(t, root)
			for _, c := range []struct {
				script string
				env    map[string]string
				stdin  string
				direct bool // in software and none modes
				sorted bool
			}{
				{script: "env", direct: true, sorted: true},
				{script: "env", env: map[string]string{"K": "v", "PATH": root + "/bin:/usr/bin:/bin"}, direct: true, sorted: true},
				{script: "cd sub && env", direct: true, sorted: true},
				{script: "cd sub/deeper && env", direct: true, sorted: true},
				{script: "cd ./sub//deeper/ && env", direct: true, sorted: true},
				{script: "cd sub/deeper/.. && env", direct: true, sorted: true},
				{script: "cd " + root + "//sub/. && env", direct: true, sorted: true},
				{script: "cd /" + root + "/sub && env", sorted: true},
				{script: `HOME='` + root + `' K='v' cd "` + root + `/sub" && env`, direct: true, sorted: true},
				{script: "bin/myenv", direct: true, sorted: true},
				{script: "myenv", env: map[string]string{"PATH": root + "/bin:/usr/bin"}, direct: true, sorted: true},
				{script: "cd sub && ../bin/myenv", direct: true, sorted: true},
				{script: "true", direct: true},
				{script: "false", direct: true},
				{script: "ls -a", direct: true},
				{script: "cd sub && ls -a ..", direct: true},
				{script: "ls /nonexistent", direct: true},
				{script: "sh -c 'echo out; echo err >&2; exit 7'", direct: true},
				{script: "./hello.sh a 'b c'", direct: true},
				{script: "cat", stdin: "some input\n", direct: true},
				// Signal mask and dispositions, umask, credentials and
				// open descriptors are what bash passes on.
				{script: "grep -E '^(Sig[BIC]|Umask|NoNewPrivs|Seccomp|Cap|Groups|Uid|Gid)' /proc/self/status", direct: true},
				{script: "ls /proc/self/fd", direct: true},
				{script: "pwd"},
				{script: "true", env: map[string]string{"PATH": root + "/fake:/usr/bin"}},
				{script: "myenv", env: map[string]string{"PATH": root + "/links:/usr/bin"}, direct: true, sorted: true},
				{script: "true", env: map[string]string{"PATH": root + "/links:/usr/bin"}, direct: true},
				{script: "links/faketrue", direct: true, sorted: true},
				{script: "dangling", env: map[string]string{"PATH": root + "/links:/usr/bin"}},
				{script: "links/dangling"},
				{script: "%1"},
				{script: "nosuchprogram"},
				{script: "cd sub && nosuchprogram"},
				{script: "./plain"},
				{script: "./noexec"},
				{script: "true --help"},
				{script: "env", env: map[string]string{"LC_ALL": "en_US.UTF-8", "PS1": "$ "}, sorted: true},
				{script: "env", env: map[string]string{"LC_ALL": "POSIX", "LANG": "xx_YY", "PS3": "x"}, direct: true, sorted: true},
				{script: "echo a   b"},
				{script: "env | sort"},
			} {
				env := mergeEnv(nil, c.env)
				var reqEnv map[string]string
				if len(env) > 0 {
					reqEnv = c.env
				}
				fullEnv, err := fast.env(root, reqEnv, "")
				if err != nil {
					t.Fatal(err)
				}
				if _, took := fast.direct(policy.Parse(c.script), root, root, fullEnv); mode != ModeBwrap && took != c.direct {
					t.Errorf("%q: direct = %v, want %v", c.script, took, c.direct)
				}
				var res [2]Result
				for i, e := range []*executor{fast, slow} {
					req := Request{Command: c.script, Env: reqEnv}
					if c.stdin != "" {
						req.Stdin = strings.NewReader(c.stdin)
					}
					r, err := e.Run(context.Background(), req)
					if err != nil {
						t.Fatalf("%q: %v", c.script, err)
					}
					if c.sorted {
						r.Stdout = []byte(sortedLines(r.Stdout))
					}
					// Each landlock executor has its own private
					// temporary directories.
					r.Stdout = tmpdirLine.ReplaceAll(r.Stdout, []byte("TMPDIR=<private>"))
					res[i] = r
				}
				f, s := res[0], res[1]
				if !bytes.Equal(f.Stdout, s.Stdout) || !bytes.Equal(f.Stderr, s.Stderr) ||
					f.ExitCode != s.ExitCode || f.Signal != s.Signal || f.TimedOut != s.TimedOut {
					t.Errorf("%q differs:\nfast: exit %d %q\n%s\nstderr %q\nshell: exit %d %q\n%s\nstderr %q",
						c.script, f.ExitCode, f.Signal, f.Stdout, f.Stderr, s.ExitCode, s.Signal, s.Stdout, s.Stderr)
				}
				if c.script == "nosuchprogram" && (f.ExitCode != 127 || !strings.Contains(string(f.Stderr), "command not found")) {
					t.Errorf("nosuchprogram: exit %d %q, want bash's 127", f.ExitCode, f.Stderr)
				}
			}
		})
	}
}

// TestDirectSignalsAndTimeouts: a program killed by a signal, and one
// killed by the timeout, report the same both ways.
func TestDirectSignalsAndTimeouts(t *testing.T) {
	for _, mode := range []Mode{ModeSoftware, ModeBwrap, ModeLandlock} {
		t.Run(string(mode), func(t *testing.T) {
			fast, slow, root := bothWays(t, mode)
			env, _ := fast.env(root, nil, "")
			for _, c := range []struct {
				script  string
				timeout time.Duration
			}{
				{script: "sh -c 'kill -KILL $$'"},
				{script: "sh -c 'kill -TERM $$'"},
				{script: "sleep 30", timeout: 200 * time.Millisecond},
				{script: "cd . && sleep 30", timeout: 200 * time.Millisecond},
			} {
				if _, ok := fast.direct(policy.Parse(c.script), root, root, env); !ok {
					t.Fatalf("%q does not take the fast path", c.script)
				}
				var res [2]Result
				for i, e := range []*executor{fast, slow} {
					begin := time.Now()
					r, err := e.Run(context.Background(), Request{Command: c.script, Timeout: c.timeout})
					if err != nil {
						t.Fatal(err)
					}
					if time.Since(begin) > 10*time.Second {
						t.Fatalf("%q took %v", c.script, time.Since(begin))
					}
					res[i] = r
				}
				f, s := res[0], res[1]
				if f.ExitCode != s.ExitCode || f.Signal != s.Signal || f.TimedOut != s.TimedOut || !bytes.Equal(f.Stderr, s.Stderr) {
					t.Errorf("%q: fast exit %d %q timedOut %v stderr %q; shell exit %d %q timedOut %v stderr %q",
						c.script, f.ExitCode, f.Signal, f.TimedOut, f.Stderr, s.ExitCode, s.Signal, s.TimedOut, s.Stderr)
				}
				if c.timeout > 0 && !f.TimedOut {
					t.Errorf("%q did not time out", c.script)
				}
			}
		})
	}
}

// TestDirectStart: Start (SSH exec) takes the fast path with pipes and on
// a pty, with the same output as the shell.
func TestDirectStart(t *testing.T) {
	fast, slow, _ := bothWays(t, ModeSoftware)
	for _, c := range []struct {
		script string
		pty    *Pty
	}{
		{script: "env"},
		{script: "cd . && env"},
		{script: "true"},
		{script: "stty size", pty: &Pty{Term: "xterm", Cols: 80, Rows: 24}},
		{script: "env", pty: &Pty{Term: "xterm", Cols: 80, Rows: 24}},
		{script: "grep -E '^(Sig[BIC]|Umask|NoNewPrivs)' /proc/self/status", pty: &Pty{Cols: 80, Rows: 24}},
		{script: "grep -E '^(Sig[BIC]|Umask|NoNewPrivs)' /proc/self/status"},
	} {
		term := ""
		if c.pty != nil {
			term = "xterm"
		}
		env, _ := fast.env(fast.root, nil, term)
		if _, ok := fast.direct(policy.Parse(c.script), fast.root, fast.root, env); !ok {
			t.Errorf("%q does not take the fast path", c.script)
		}
		var outs [2]string
		var codes [2]int
		for i, e := range []*executor{fast, slow} {
			var out, errb bytes.Buffer
			p, err := e.Start(context.Background(), Request{Command: c.script, Pty: c.pty}, Stdio{Stdout: &out, Stderr: &errb})
			if err != nil {
				t.Fatal(err)
			}
			st, err := p.Wait()
			if err != nil {
				t.Fatal(err)
			}
			outs[i], codes[i] = sortedLines(out.Bytes())+"|"+errb.String(), st.Code
		}
		if outs[0] != outs[1] || codes[0] != codes[1] {
			t.Errorf("%q: fast %d %q, shell %d %q", c.script, codes[0], outs[0], codes[1], outs[1])
		}
	}
}

// TestDirectStartFailureFallsBack: a program the kernel refuses (here a
// #! interpreter that does not exist) is retried through the shell and
// reported as bash reports it.
func TestDirectStartFailureFallsBack(t *testing.T) {
	fast, slow, root := bothWays(t, ModeSoftware)
	if err := os.WriteFile(filepath.Join(root, "bad.sh"), []byte("#!/nonexistent/interp\necho x\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env, _ := fast.env(root, nil, "")
	if _, ok := fast.direct(policy.Parse("./bad.sh"), root, root, env); !ok {
		t.Fatal("./bad.sh does not take the fast path")
	}
	f := run(t, fast, Request{Command: "./bad.sh"})
	s := run(t, slow, Request{Command: "./bad.sh"})
	if f.ExitCode != s.ExitCode || !bytes.Equal(f.Stderr, s.Stderr) || f.ExitCode != 127 {
		t.Errorf("fast exit %d %q, shell exit %d %q", f.ExitCode, f.Stderr, s.ExitCode, s.Stderr)
	}
}

// FuzzDirect: parseDirect never panics, and what it accepts is plainly
// literal: mvdan.cc/sh's own expansion of every word gives the same argv,
// and the script printed back by syntax.Printer is accepted with the
// same result.
func FuzzDirect(f *testing.F) {
	for _, c := range directScripts {
		f.Add(c.script)
	}
	f.Fuzz(func(t *testing.T, script string) {
		plan, ok := parseDirect(policy.Parse(script))
		if !ok {
			return
		}
		p := syntax.NewParser(syntax.Variant(syntax.LangBash))
		file, err := p.Parse(strings.NewReader(script), "")
		if err != nil {
			t.Fatalf("accepted %q that does not parse: %v", script, err)
		}
		var words []*syntax.Word
		syntax.Walk(file, func(n syntax.Node) bool {
			switch n := n.(type) {
			case *syntax.CallExpr:
				if len(n.Args) > 0 {
					words = n.Args
				}
			case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp, *syntax.ProcSubst,
				*syntax.ExtGlob, *syntax.BraceExp, *syntax.Redirect:
				t.Fatalf("accepted %q with a %T", script, n)
			}
			return true
		})
		// Walk visits the cd first and the command last.
		cfg := &expand.Config{Env: expand.ListEnviron(), NoUnset: true}
		got, err := expand.Fields(cfg, words...)
		if err != nil || !reflect.DeepEqual(got, plan.argv) {
			t.Fatalf("accepted %q as %q, but it expands to %q (%v)", script, plan.argv, got, err)
		}
		// And bash itself splits the simple form into the same words:
		// they become printf's arguments (blank lines before the one
		// statement would end printf's).
		if !plan.hasCd {
			out, err := exec.Command("bash", "-c", `printf '%s\0' `+strings.TrimLeft(script, " \t\n")).Output()
			if err != nil || string(out) != strings.Join(plan.argv, "\x00")+"\x00" {
				t.Fatalf("accepted %q as %q, but bash sees %q (%v)", script, plan.argv, out, err)
			}
		}
		var buf bytes.Buffer
		if err := syntax.NewPrinter().Print(&buf, file); err != nil {
			t.Fatal(err)
		}
		again, ok := parseDirect(policy.Parse(buf.String()))
		if !ok || !reflect.DeepEqual(again, plan) {
			t.Fatalf("accepted %q as %+v, but its printed form %q gives %+v %v", script, plan, buf.String(), again, ok)
		}
	})
}

// TestDirectRunAs: with --run-as the direct path decides with the run-as
// user's permissions, and both ways give the same results.
func TestDirectRunAs(t *testing.T) {
	name := throwawayUser(t, "agbd")
	modes := []Mode{ModeSoftware}
	if _, err := exec.LookPath("bwrap"); err == nil {
		modes = append(modes, ModeBwrap)
	}
	for _, mode := range modes {
		t.Run(string(mode), func(t *testing.T) {
			ws := testenv.SharedTempDir(t) // the user reaches and writes it, whatever TMPDIR is
			os.Chmod(ws, 0o777)
			directFixture(t, ws)
			elf, _ := os.ReadFile("/usr/bin/env")
			// Executable by root (the owner) only.
			if err := os.WriteFile(filepath.Join(ws, "rootonly"), elf, 0o744); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(ws, "rootonly"), 0o744); err != nil { // whatever the umask
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(ws, "closed"), 0o700); err != nil {
				t.Fatal(err)
			}
			var ex [2]*executor
			for i := range ex {
				e, err := New(Config{Mode: mode, WorkspaceRoot: ws, RunAs: name, Policy: PolicyConfig{Disabled: true}})
				if err != nil {
					if mode == ModeBwrap && strings.Contains(err.Error(), "user namespaces are unavailable") {
						t.Skipf("bwrap as an unprivileged user needs user namespaces: %v", err)
					}
					t.Fatal(err)
				}
				defer e.Close()
				ex[i] = e.(*executor)
			}
			ex[1].noDirect = true
			env, _ := ex[0].env(ws, nil, "")
			for _, c := range []struct {
				script string
				direct bool
			}{
				{"id", true},
				{"env", true},
				{"bin/myenv", true},
				{"./rootonly", false},
				{"cd closed && true", false},
				{"touch mine", true},
			} {
				if _, ok := ex[0].direct(policy.Parse(c.script), ws, ws, env); ok != c.direct {
					t.Errorf("%q: direct = %v, want %v", c.script, ok, c.direct)
				}
				var res [2]Result
				for i, e := range ex {
					os.Remove(filepath.Join(ws, "mine"))
					r, err := e.Run(context.Background(), Request{Command: c.script})
					if err != nil {
						t.Fatal(err)
					}
					r.Stdout = []byte(sortedLines(r.Stdout))
					res[i] = r
				}
				f, s := res[0], res[1]
				if !bytes.Equal(f.Stdout, s.Stdout) || !bytes.Equal(f.Stderr, s.Stderr) || f.ExitCode != s.ExitCode {
					t.Errorf("%q differs:\nfast: exit %d %q stderr %q\nshell: exit %d %q stderr %q",
						c.script, f.ExitCode, f.Stdout, f.Stderr, s.ExitCode, s.Stdout, s.Stderr)
				}
			}
		})
	}
}

// TestCommandLineRunsArgvExactly: CommandLine's string runs the argv as
// given, whatever the words hold (quotes, spaces, $, globs, newlines).
func TestCommandLineRunsArgvExactly(t *testing.T) {
	root := t.TempDir()
	e, err := New(Config{Mode: ModeNone, WorkspaceRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	words := []string{"it's", "a b", "$HOME", "*", "line\nbreak", `back\slash`, ""}
	res, err := e.Run(context.Background(), Request{Command: CommandLine(append([]string{"printf", "[%s]"}, words...)...)})
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for _, w := range words {
		want += "[" + w + "]"
	}
	if string(res.Stdout) != want {
		t.Errorf("got %q, want %q", res.Stdout, want)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "noexec"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // "" = not found
	}{
		{"sh", nil, "/usr/bin/sh"},
		{"tool", nil, ""},
		{"tool", map[string]string{"PATH": "rel:" + dir}, filepath.Join(dir, "tool")},
		{"noexec", map[string]string{"PATH": dir}, ""},
		{"./x/y", nil, "./x/y"},
	} {
		got, err := LookPath(tc.name, tc.env)
		if tc.want == "" {
			if err == nil || errcode.Of(err) != errcode.MissingUtilities {
				t.Errorf("LookPath(%q, %v) = %q, %v; want MISSING_UTILITIES", tc.name, tc.env, got, err)
			}
			continue
		}
		if got != tc.want && !(tc.name == "sh" && got == "/bin/sh") {
			t.Errorf("LookPath(%q, %v) = %q, %v; want %q", tc.name, tc.env, got, err, tc.want)
		}
	}
}

package policy

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mvdan.cc/sh/v3/syntax"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// The differential against bash: the policy parses a line with
// mvdan.cc/sh and judges the programs it would run; /bin/bash reads the
// same line itself. Wherever the two read it differently, bash can run a
// program the policy never judged. bashBox runs a line under the real
// bash, in bwrap, with every program directory (/usr/bin, /usr/sbin,
// /usr/local/bin, /usr/local/sbin; /bin and /sbin are links to them on
// Debian) replaced by stubs that only record their name and arguments:
// whatever name or path bash reaches a program by, the stub records it
// and nothing real runs. The root file system is read-only, the network,
// pids and users are unshared, and each run has its own workspace.

// bashBox is one sandbox for running lines under bash.
type bashBox struct {
	dir   string // the box's files: stubs/, runs/
	bwrap string
	bash  string // the real bash (resolved), bound at /run/bdiff/bash
	dash  string // the stubs' interpreter, bound at /run/bdiff/dash
	wrap  string // this test binary, bound at /run/bdiff/wrap: the wrappers (bashdiff_wrap_test.go)
	runs  atomic.Int64
}

// bashExec is one program bash ran: the stub's name, its arguments and
// the variables of its environment that the box did not set.
type bashExec struct {
	name string
	args []string
	env  map[string]string
	data bool // a wrapper gave it words read at run time (BDIFF_DATA)
}

func (e bashExec) String() string {
	return fmt.Sprintf("{%s %v}", e.name, e.args)
}

// boxEnv are the variables every program in the box gets.
var boxEnv = set("PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "_")

// parseExports reads dash's export -p output.
func parseExports(out string) map[string]string {
	env := map[string]string{}
	f, err := syntax.NewParser().Parse(strings.NewReader(out), "")
	if err != nil {
		env["BDIFF_UNPARSED_ENV"] = out // judged as a value nobody expects
		return env
	}
	for _, st := range f.Stmts {
		d, ok := st.Cmd.(*syntax.DeclClause)
		if !ok {
			continue
		}
		for _, a := range d.Args {
			if a.Name == nil || a.Value == nil || boxEnv[a.Name.Value] || a.Name.Value == "BDIFF_DATA" {
				continue
			}
			if v, ok := litWord(a.Value); ok {
				env[a.Name.Value] = v
			}
		}
	}
	return env
}

// stubNames are the programs the box has stubs for: every program the
// policy has a rule for, the wrappers, shells, interpreters and
// downloaders, and some harmless ones that test lines use.
func stubNames() []string {
	names := map[string]bool{}
	for n := range programs() {
		names[n] = true
	}
	for _, m := range []map[string]bool{shells, langInterpreters, downloaders} {
		for n := range m {
			names[n] = true
		}
	}
	for _, n := range []string{"id", "ls", "cat", "true", "false", "date", "head", "grep", "sleep",
		"mkfs.ext4", "python3.12", "whoami", "man", "less", "uname", "wc", "seq", "tr", "base64", "xxd", "jq", "awk"} {
		names[n] = true
	}
	out := make([]string, 0, len(names))
	for n := range names {
		if n != "" && !strings.ContainsAny(n, "/.") || strings.HasPrefix(n, "mkfs.") || strings.HasPrefix(n, "python3.") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// alwaysRefused are the programs the policy refuses whatever their
// arguments.
var alwaysRefused = func() map[string]bool {
	m := map[string]bool{}
	for _, l := range [][]string{privilegeTools, diskTools, systemTools, remoteTools, firewallTools} {
		for _, n := range l {
			m[n] = true
		}
	}
	return m
}()

// newBashBox makes the box, or ends the test when bash or bwrap is
// missing (a failure under CI=true) or the kernel gives no namespaces.
func newBashBox(tb testing.TB) *bashBox {
	tb.Helper()
	if runtime.GOOS != "linux" {
		tb.Skip("the differential against bash runs on Linux only: bwrap confines the bash it runs")
	}
	if _, err := os.Stat("/bin/bash"); err != nil {
		testenv.Missing(tb, "/bin/bash is missing, so the policy cannot be compared with bash (apt-get install bash)")
	}
	bw := testenv.Bwrap(tb)
	dash := testenv.Command(tb, "dash", "dash")
	b := &bashBox{dir: tb.TempDir(), bwrap: bw}
	var err error
	if b.bash, err = filepath.EvalSymlinks("/bin/bash"); err != nil {
		tb.Fatal(err)
	}
	if b.dash, err = filepath.EvalSymlinks(dash); err != nil {
		tb.Fatal(err)
	}
	if b.wrap, err = os.Executable(); err != nil {
		tb.Fatal(err)
	}
	if b.dir, err = filepath.EvalSymlinks(b.dir); err != nil {
		tb.Fatal(err)
	}
	out, err := exec.Command(b.bash, "-c", `echo "${BASH_VERSINFO[0]}"`).Output()
	if err != nil {
		tb.Fatal(err)
	}
	if v := strings.TrimSpace(string(out)); v < "5" || len(v) != 1 {
		tb.Skipf("/bin/bash is version %s; the policy reads bash 5's dialect, so the comparison needs bash 5", v)
	}
	stubs := filepath.Join(b.dir, "stubs")
	if err := os.MkdirAll(stubs, 0o755); err != nil {
		tb.Fatal(err)
	}
	// Each stub writes the program it stands for, its arguments
	// (NUL-separated), a \x01 and its environment (dash's export -p) to a
	// file of its own under /run/bdiff/log (noclobber makes the name
	// unique). It knows its own name, so a link to it (ln -s
	// /usr/bin/sudo x; ./x) records the program it is. A wrapper's stub
	// then runs what the wrapper would run (runWrapper).
	for _, n := range stubNames() {
		stub := "#!/run/bdiff/dash\nme=" + n + "\n" +
			"n=$$; while ! (set -C; : > /run/bdiff/log/$n) 2>/dev/null; do n=$n.x; done\n" +
			"{ printf '%s\\0' \"$me\" \"$@\"; printf '\\1'; export -p; } > /run/bdiff/log/$n\n"
		if wrappedStubs[n] {
			stub += "exec /run/bdiff/wrap " + wrapArg + " \"$me\" \"$@\"\n"
		}
		if err := os.WriteFile(filepath.Join(stubs, n), []byte(stub), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	// The box works at all: a stub run through PATH and one by path are
	// recorded, and nothing else is reachable.
	ws, execs, _, err := b.run("sudo id; /usr/bin/rm -rf /; /bin/su -; /usr/bin/bwrap --version || dd")
	if err != nil {
		tb.Skipf("bwrap cannot run bash here (%v); the kernel may refuse user namespaces", err)
	}
	got := fmt.Sprint(execs)
	if want := "[{sudo [id]} {rm [-rf /]} {su [-]} {dd []}]"; got != want {
		tb.Fatalf("the box in %s recorded %s, want %s", ws, got, want)
	}
	// The wrappers run what they would run, through stubs again.
	var wout string
	ws, execs, wout, err = b.run(`env -i X=1 nice -n5 -- sh -c 'sudo -l'`)
	got = fmt.Sprint(execs)
	if want := "[{env [-i X=1 nice -n5 -- sh -c sudo -l]} {nice [-n5 -- sh -c sudo -l]} {sh [-c sudo -l]} {sudo [-l]}]"; err != nil || got != want {
		tb.Fatalf("the box in %s recorded %s (%v, output %q), want %s", ws, got, err, wout, want)
	}
	return b
}

// run runs line with bash -c in a fresh workspace, as the executor does
// (sandbox/exec.go: the shell's -c), with PATH holding only the stubs
// and stdin empty, for at most a few seconds. It returns the workspace
// (the policy's boundary for the same line) and the programs run, in the
// order they were run.
func (b *bashBox) run(line string) (ws string, execs []bashExec, output string, err error) {
	ws = b.workspace()
	execs, output, err = b.runIn(ws, line)
	return ws, execs, output, err
}

// workspace makes a fresh workspace for one run; runIn removes it.
func (b *bashBox) workspace() string {
	ws := filepath.Join(b.dir, "runs", fmt.Sprint(b.runs.Add(1)), "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		panic(err)
	}
	return ws
}

// runIn is run in the workspace ws, made by workspace.
func (b *bashBox) runIn(ws, line string) (execs []bashExec, output string, err error) {
	runDir := filepath.Dir(ws)
	logs := filepath.Join(runDir, "log")
	defer os.RemoveAll(runDir)
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, "", err
	}
	stubs := filepath.Join(b.dir, "stubs")
	args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--tmpfs", "/run", "--ro-bind", b.bash, "/run/bdiff/bash", "--ro-bind", b.dash, "/run/bdiff/dash",
		"--ro-bind", b.wrap, "/run/bdiff/wrap",
		"--bind", logs, "/run/bdiff/log", "--bind", ws, ws}
	for _, d := range []string{"/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"} {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			args = append(args, "--ro-bind", stubs, d)
		}
	}
	args = append(args, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--chdir", ws, "/run/bdiff/bash", "-c", line)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, b.bwrap, args...)
	cmd.Env = []string{"PATH=/usr/bin", "HOME=" + ws}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	runErr := cmd.Run()
	if out.Len() > 4096 {
		out.Truncate(4096)
	}
	if runErr != nil && strings.Contains(out.String(), "bwrap:") {
		return nil, out.String(), fmt.Errorf("%v: %s", runErr, out.String())
	}
	ents, err := os.ReadDir(logs)
	if err != nil {
		return nil, out.String(), err
	}
	type rec struct {
		at  time.Time
		pid int // the stub's, from its log's name: $$, then .x per clash
		e   bashExec
	}
	var recs []rec
	for _, de := range ents {
		data, err := os.ReadFile(filepath.Join(logs, de.Name()))
		if err != nil || len(data) == 0 {
			continue // a stub killed before it wrote
		}
		fi, _ := de.Info()
		argv, exports, _ := strings.Cut(string(data), "\x01")
		parts := strings.Split(strings.TrimSuffix(argv, "\x00"), "\x00")
		pid, _ := strconv.Atoi(strings.SplitN(de.Name(), ".", 2)[0])
		recs = append(recs, rec{fi.ModTime(), pid, bashExec{name: parts[0], args: parts[1:], env: parseExports(exports),
			data: strings.Contains(exports, "BDIFF_DATA=")}})
	}
	// In the order they ran: by the time each log was written, and, within
	// one tick of the file system's clock, by pid (the box's pid namespace
	// counts up from 1), not by the names' order as text ("10" < "9").
	sort.SliceStable(recs, func(i, j int) bool {
		if !recs[i].at.Equal(recs[j].at) {
			return recs[i].at.Before(recs[j].at)
		}
		return recs[i].pid < recs[j].pid
	})
	for _, r := range recs {
		execs = append(execs, r.e)
	}
	return execs, out.String(), nil
}

// bashFinding judges line with p; when p accepts it, runs it under bash
// and returns what bash ran that p refuses on its own (each program run
// judged as the command `name args...`, quoted), or "" when bash ran
// nothing the policy would refuse. ran reports whether bash ran at all.
func bashFinding(b *bashBox, p *Policy, line string) (finding string, ran bool) {
	ws := b.workspace()
	if p.Check(line, ws) != nil {
		os.RemoveAll(filepath.Dir(ws))
		return "", false
	}
	execs, out, err := b.runIn(ws, line)
	if err != nil {
		return fmt.Sprintf("%q: the box could not run it: %v", line, err), false
	}
	// A program the policy refuses whatever its arguments is a finding
	// however bash came to run it. Other refusals (rm -rf /cache) count
	// only for a line without expansions: "$BUILD_DIR/cache" with the
	// variable unset is a value computed at run time, which the policy
	// does not judge by design, not a different reading of the line.
	static := true
	if f, err := parse(line); err == nil {
		syntax.Walk(f, func(n syntax.Node) bool {
			switch n.(type) {
			case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ArithmExp:
				static = false
			}
			return static
		})
	}
	var bad []string
	for _, e := range execs {
		if e.name == "bdiff-unparsed" {
			// A wrapper the harness cannot follow: the line reached it
			// and the policy accepted the line, so what it runs is unknown.
			bad = append(bad, fmt.Sprintf("a wrapper the harness cannot follow: %q", e.args))
			continue
		}
		cmd := quoteCommand(e)
		if err := p.Check(cmd, ws); err != nil && (static && !e.data || alwaysRefused[e.name]) {
			bad = append(bad, fmt.Sprintf("%s (%v)", cmd, err))
		}
	}
	if len(bad) == 0 {
		return "", true
	}
	return fmt.Sprintf("the policy accepts %q, but bash ran %s; output: %q", line, strings.Join(bad, "; "), out), true
}

// bashDiffBytes are lines with bytes the corpus file cannot hold: CR,
// invalid UTF-8, Unicode blanks, and a long and a deep line.
var bashDiffBytes = []string{
	"sudo\r id", "echo x\r\nsudo id", "su\\\r\ndo id", "echo x;\rsudo id",
	"cat <<EOF\r\nsudo id\r\nEOF\r\n", "cat <<EOF\nx\nEOF\r\nsudo id\nEOF",
	"\xffsudo id", "echo \xc0; sudo id", "echo \xe2\x80; sudo id", "echo '\xff'; sudo id",
	"x\u00a0sudo id", "echo x\u2028sudo id", "echo x\u0085sudo id", "s\u200budo id",
	"echo \x00; sudo id",
	strings.Repeat("x", 100<<10) + "; sudo id",
	strings.Repeat("$(", 200) + "sudo id" + strings.Repeat(")", 200),
	strings.Repeat("(", 300) + "sudo id" + strings.Repeat(")", 300),
}

// bashDiffLines are testdata/bash-diff.txt's lines and bashDiffBytes.
func bashDiffLines(tb testing.TB) []string {
	var out []string
	for _, c := range readCorpus(tb, "bash-diff.txt") {
		out = append(out, c.command)
	}
	return append(out, bashDiffBytes...)
}

// TestPolicyMatchesBash: for every line of bashDiffLines the policy
// accepts, the real bash runs nothing the policy refuses on its own.
func TestPolicyMatchesBash(t *testing.T) {
	b := newBashBox(t)
	p := mustPolicy(t, false)
	lines := bashDiffLines(t)
	type result struct {
		finding string
		ran     bool
	}
	results := make([]result, len(lines))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4) // bwrap's start is mostly waiting
	for i, line := range lines {
		if strings.IndexByte(line, 0) >= 0 {
			continue // no program gets a NUL in its arguments: the executor cannot pass such a line to bash
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			f, r := bashFinding(b, p, line)
			results[i] = result{f, r}
		}()
	}
	wg.Wait()
	ran := 0
	for _, r := range results {
		if r.ran {
			ran++
		}
		if r.finding != "" {
			t.Error(r.finding)
		}
	}
	if ran < 40 {
		t.Errorf("only %d lines were run under bash; the comparison looked at too little", ran)
	}
	t.Logf("%d lines, %d accepted by the policy and run under bash", len(lines), ran)
}

// FuzzPolicyMatchesBash: for any line the policy accepts, bash runs
// nothing the policy refuses on its own. Seeded with bashDiffLines and
// the corpora; run it with
//
//	go test -run '^$' -fuzz FuzzPolicyMatchesBash -fuzztime 3m ./sandbox/policy/
func FuzzPolicyMatchesBash(f *testing.F) {
	// Without -fuzz, go test runs every seed under bash: the lines of
	// bash-diff.txt are TestPolicyMatchesBash's already, and the corpora's
	// would take most of a minute, so a plain run takes a sample of the
	// corpora (every 40th line), which still runs the fuzz function's
	// comparison; -fuzz starts from every line.
	fuzzing := false
	if fl := flag.Lookup("test.fuzz"); fl != nil && fl.Value.String() != "" {
		fuzzing = true
		for _, l := range bashDiffLines(f) {
			f.Add(l)
		}
	}
	n := 0
	for _, name := range []string{"blocked.txt", "allowed.txt"} {
		for _, c := range readCorpus(f, name) {
			if n++; fuzzing || n%40 == 0 {
				f.Add(c.command)
			}
		}
	}
	b := newBashBox(f)
	p := mustPolicy(f, false)
	f.Fuzz(func(t *testing.T, line string) {
		if strings.IndexByte(line, 0) >= 0 || len(line) > 4096 {
			return // the executor cannot pass a NUL to bash; long lines only slow the search
		}
		if finding, _ := bashFinding(b, p, line); finding != "" {
			t.Error(finding)
		}
	})
}

// quoteCommand is the command line that runs e on its own: its
// environment as assignments, then its words, quoted.
func quoteCommand(e bashExec) string {
	quote := func(w string) string {
		q, err := syntax.Quote(w, syntax.LangBash)
		if err != nil {
			return "$'\\x00'" // a value bash could not have passed; never judged harmless
		}
		return q
	}
	var words []string
	names := make([]string, 0, len(e.env))
	for n := range e.env {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		words = append(words, n+"="+quote(e.env[n]))
	}
	words = append(words, quote(e.name))
	for _, a := range e.args {
		words = append(words, quote(a))
	}
	return strings.Join(words, " ")
}

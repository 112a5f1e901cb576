package policy

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The box's wrappers run what they would run. A wrapper's stub (a
// program that runs programs: env, xargs, find, timeout, sh -c, ...)
// records its own name and arguments like every stub, then execs the
// test binary at /run/bdiff/wrap with "bdiff-wrap NAME ARGS...". There
// runWrapper reads ARGS as the real program reads them (GNU getopt_long,
// with its "+" mode, abbreviated long options, clusters and attached
// values, env -S, xargs's input, find's walk, SHELL for flock -c and
// script -c) and execs the program it would run: a stub again, which
// records it. The shells run as the real dash or bash (bound in the
// box), so sh -c CODE runs CODE. The knowledge here is written from the
// tools' manuals and sources (coreutils 9.1, util-linux 2.38, findutils
// 4.9, GNU time 1.9, procps 4), not from the policy's tables, so the
// oracle does not share the policy's reading of a wrapper.
//
// A wrapper that cannot follow its arguments records "bdiff-unparsed"
// (the reason, then its name and arguments) and exits 125; bashFinding
// reports that for a line the policy accepted. Programs run with words
// read at run time (xargs's input, find's file names) get BDIFF_DATA=1
// in their environment: their refusals count as findings only for a
// program refused whatever its arguments, as for a line with expansions.

const wrapArg = "bdiff-wrap"

func init() {
	if len(os.Args) > 2 && os.Args[1] == wrapArg {
		os.Exit(runWrapper(os.Args[2], os.Args[3:]))
	}
}

// wrappedStubs are the stubs that run what they would run.
var wrappedStubs = set("env", "nice", "timeout", "nohup", "setsid", "stdbuf", "ionice", "chrt", "taskset",
	"time", "xargs", "find", "flock", "watch", "script", "busybox", "toybox", "coreutils",
	"sh", "bash", "dash", "ash", "rbash")

// gnuOpts is a getopt_long specification.
type gnuOpts struct {
	short   string         // getopt's string: "k:s:v", x:: an optional value
	long    map[string]int // name: 0 no value, 1 a value, 2 an optional one (--x=v only)
	permute bool           // options after operands (no "+")
}

type gnuOpt struct {
	name, val string // "-k" or "--kill-after"
}

// parse reads args as getopt_long does; it returns the options and the
// operands, or a reason getopt would fail.
func (g gnuOpts) parse(args []string) (opts []gnuOpt, rest []string, bad string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(rest, args[i+1:]...), ""
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			full, ok := "", false
			if _, exact := g.long[name]; exact {
				full, ok = name, true
			} else {
				for n := range g.long {
					if strings.HasPrefix(n, name) {
						if ok {
							return nil, nil, "ambiguous option " + a
						}
						full, ok = n, true
					}
				}
			}
			if !ok || name == "" {
				return nil, nil, "unknown option " + a
			}
			switch g.long[full] {
			case 0:
				if hasVal {
					return nil, nil, "option takes no value " + a
				}
			case 1:
				if !hasVal {
					if i+1 >= len(args) {
						return nil, nil, "option needs a value " + a
					}
					i++
					val = args[i]
				}
			}
			opts = append(opts, gnuOpt{"--" + full, val})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				k := strings.IndexByte(g.short, a[j])
				if k < 0 || a[j] == ':' {
					return nil, nil, fmt.Sprintf("unknown option -%c", a[j])
				}
				spec := g.short[k+1:]
				if !strings.HasPrefix(spec, ":") {
					opts = append(opts, gnuOpt{"-" + a[j:j+1], ""})
					continue
				}
				val := a[j+1:]
				if val == "" && !strings.HasPrefix(spec, "::") {
					if i+1 >= len(args) {
						return nil, nil, fmt.Sprintf("option -%c needs a value", a[j])
					}
					i++
					val = args[i]
				}
				opts = append(opts, gnuOpt{"-" + a[j:j+1], val})
				break
			}
		default:
			if !g.permute {
				return opts, append(rest, args[i:]...), ""
			}
			rest = append(rest, a)
		}
	}
	return opts, rest, ""
}

// is reports whether o is one of names ("-s", "--signal").
func (o gnuOpt) is(names ...string) bool {
	for _, n := range names {
		if o.name == n {
			return true
		}
	}
	return false
}

// wrapRun is what a wrapper does once it has read its arguments.
type wrapRun struct {
	argv []string
	env  []string
	dir  string
	data bool // argv holds words read at run time
}

// getoptFailed is a wrapper whose options getopt refuses: an ambiguous
// abbreviation or a missing value makes the tool fail and run nothing,
// and an option this file does not know is one the harness cannot follow.
func getoptFailed(name string, args []string, why string) int {
	if strings.HasPrefix(why, "unknown option") {
		return unparsed(name, args, why)
	}
	return 1
}

func unparsed(name string, args []string, why string) int {
	record("bdiff-unparsed", append([]string{why, name}, args...))
	fmt.Fprintf(os.Stderr, "bdiff-wrap %s: %s\n", name, why)
	return 125
}

// record writes a record as the stubs do (argv NUL-separated, \x01, the
// environment).
func record(name string, args []string) {
	var b strings.Builder
	for _, a := range append([]string{name}, args...) {
		b.WriteString(a + "\x00")
	}
	b.WriteString("\x01")
	for _, kv := range os.Environ() {
		if n, v, ok := strings.Cut(kv, "="); ok && ValidEnvName(n) {
			b.WriteString("export " + n + "='" + strings.ReplaceAll(v, "'", `'\''`) + "'\n")
		}
	}
	for n := 0; ; n++ {
		f, err := os.OpenFile(fmt.Sprintf("/run/bdiff/log/w%d.%d", os.Getpid(), n), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.WriteString(b.String())
			f.Close()
			return
		}
		if !os.IsExist(err) {
			return
		}
	}
}

// lookPath finds prog as execvp does with the PATH of env ("/bin:/usr/bin"
// when unset).
func lookPath(prog string, env []string) string {
	if strings.Contains(prog, "/") {
		return prog
	}
	p, found := "/bin:/usr/bin", false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			p, found = v, true
		}
	}
	_ = found
	for _, d := range filepath.SplitList(p) {
		if d == "" {
			d = "."
		}
		f := filepath.Join(d, prog)
		if fi, err := os.Stat(f); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return f
		}
	}
	return ""
}

func withData(env []string, data bool) []string {
	if data {
		return append(env, "BDIFF_DATA=1")
	}
	return env
}

// execRun replaces the wrapper with r's program.
func execRun(r wrapRun) int {
	if len(r.argv) == 0 {
		return 0
	}
	if r.dir != "" {
		if err := os.Chdir(r.dir); err != nil {
			return 125
		}
	}
	p := lookPath(r.argv[0], r.env)
	if p == "" {
		return 127
	}
	err := syscall.Exec(p, r.argv, withData(r.env, r.data))
	fmt.Fprintln(os.Stderr, "bdiff-wrap:", err)
	return 126
}

// runChild runs r's program and waits for it (xargs, find), stdin from
// /dev/null.
func runChild(r wrapRun) {
	p := lookPath(r.argv[0], r.env)
	if p == "" {
		return
	}
	cmd := &exec.Cmd{Path: p, Args: r.argv, Env: withData(r.env, r.data), Dir: r.dir, Stdout: os.Stdout, Stderr: os.Stderr}
	_ = cmd.Run()
}

func shellOf(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "SHELL="); ok && v != "" {
			return v
		}
	}
	return "/bin/sh"
}

// runWrapper is the wrapper name run with args, inside the box.
func runWrapper(name string, args []string) int {
	env := os.Environ()
	simple := func(g gnuOpts, values int, noCommand ...string) int {
		opts, rest, bad := g.parse(args)
		if bad != "" {
			return getoptFailed(name, args, bad)
		}
		for _, o := range opts {
			if o.is(noCommand...) || o.is("--help", "--version", "-h", "-V") {
				return 0
			}
		}
		if len(rest) <= values {
			return 0
		}
		return execRun(wrapRun{argv: rest[values:], env: env})
	}
	switch name {
	case "sh", "dash", "ash":
		return execShell("/run/bdiff/dash", name, args, env)
	case "bash", "rbash":
		return execShell("/run/bdiff/bash", name, args, env)
	case "env":
		return runEnv(args, env)
	case "nice":
		if len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' && strings.ContainsAny(args[0][1:2], "0123456789+-") && (args[0][1] != '-' && args[0][1] != '+' || len(args[0]) > 2 && args[0][2] >= '0' && args[0][2] <= '9') {
			args = args[1:] // nice -5 cmd
		}
		return simple(gnuOpts{short: "n:", long: map[string]int{"adjustment": 1, "help": 0, "version": 0}}, 0)
	case "timeout":
		return simple(gnuOpts{short: "k:s:v", long: map[string]int{"foreground": 0, "kill-after": 1,
			"preserve-status": 0, "signal": 1, "verbose": 0, "help": 0, "version": 0}}, 1)
	case "nohup":
		return simple(gnuOpts{long: map[string]int{"help": 0, "version": 0}}, 0)
	case "stdbuf":
		return simple(gnuOpts{short: "i:o:e:", long: map[string]int{"input": 1, "output": 1, "error": 1, "help": 0, "version": 0}}, 0)
	case "setsid":
		return simple(gnuOpts{short: "cfwhV", long: map[string]int{"ctty": 0, "fork": 0, "wait": 0, "help": 0, "version": 0}}, 0)
	case "ionice":
		return simple(gnuOpts{short: "c:n:p:P:tu:hV", long: map[string]int{"class": 1, "classdata": 1, "pid": 1,
			"pgid": 1, "ignore": 0, "uid": 1, "help": 0, "version": 0}}, 0, "-p", "-P", "-u", "--pid", "--pgid", "--uid")
	case "chrt":
		return simple(gnuOpts{short: "abdefiphmoRrvT:P:D:V", long: map[string]int{"all-tasks": 0, "batch": 0, "deadline": 0,
			"fifo": 0, "idle": 0, "help": 0, "max": 0, "other": 0, "pid": 0, "reset-on-fork": 0, "rr": 0,
			"sched-runtime": 1, "sched-period": 1, "sched-deadline": 1, "verbose": 0, "version": 0}}, 1, "-p", "--pid", "-m", "--max")
	case "taskset":
		return simple(gnuOpts{short: "apchV", long: map[string]int{"all-tasks": 0, "pid": 0, "cpu-list": 0, "help": 0, "version": 0}}, 1, "-p", "--pid")
	case "time":
		return simple(gnuOpts{short: "agqvf:o:pV", long: map[string]int{"append": 0, "format": 1, "help": 0, "output": 1,
			"portability": 0, "quiet": 0, "verbose": 0, "version": 0}}, 0)
	case "busybox", "toybox":
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			return 0
		}
		return execRun(wrapRun{argv: append([]string{"/usr/bin/" + filepath.Base(args[0])}, args[1:]...), env: env})
	case "coreutils":
		if len(args) > 0 {
			if prog, ok := strings.CutPrefix(args[0], "--coreutils-prog="); ok {
				return execRun(wrapRun{argv: append([]string{"/usr/bin/" + prog}, args[1:]...), env: env})
			}
		}
		return 0
	case "flock":
		opts, rest, bad := gnuOpts{short: "sexnoFuw:E:hV?", long: map[string]int{"shared": 0, "exclusive": 0,
			"unlock": 0, "nonblock": 0, "nb": 0, "no-fork": 0, "timeout": 1, "wait": 1, "conflict-exit-code": 1,
			"close": 0, "verbose": 0, "help": 0, "version": 0}}.parse(args)
		if bad != "" {
			return getoptFailed(name, args, bad)
		}
		for _, o := range opts {
			if o.is("-h", "-V", "--help", "--version") {
				return 0
			}
		}
		if len(rest) < 2 {
			return 0
		}
		if rest[1] == "-c" || rest[1] == "--command" {
			if len(rest) != 3 {
				return 64
			}
			return execRun(wrapRun{argv: []string{shellOf(env), "-c", rest[2]}, env: env})
		}
		return execRun(wrapRun{argv: rest[1:], env: env})
	case "script":
		opts, _, bad := gnuOpts{short: "ac:eE:fqI:O:B:T:t::m:Vh", permute: true, long: map[string]int{"append": 0,
			"command": 1, "echo": 1, "return": 0, "flush": 0, "force": 0, "quiet": 0, "log-in": 1, "log-out": 1,
			"log-io": 1, "log-timing": 1, "logging-format": 1, "timing": 2, "output-limit": 1, "help": 0, "version": 0}}.parse(args)
		if bad != "" {
			return getoptFailed(name, args, bad)
		}
		code, has := "", false
		for _, o := range opts {
			if o.is("-h", "-V", "--help", "--version") {
				return 0
			}
			if o.is("-c", "--command") {
				code, has = o.val, true
			}
		}
		if !has {
			return execRun(wrapRun{argv: []string{shellOf(env), "-i"}, env: env})
		}
		return execRun(wrapRun{argv: []string{shellOf(env), "-c", code}, env: env})
	case "watch":
		opts, rest, bad := gnuOpts{short: "bcCd::eghn:pq:rtvwx", long: map[string]int{"beep": 0, "color": 0,
			"no-color": 0, "differences": 2, "errexit": 0, "chgexit": 0, "equexit": 1, "interval": 1, "precise": 0,
			"no-rerun": 0, "no-title": 0, "no-wrap": 0, "exec": 0, "help": 0, "version": 0}}.parse(args)
		if bad != "" {
			return getoptFailed(name, args, bad)
		}
		exe := false
		for _, o := range opts {
			if o.is("-h", "-v", "--help", "--version") {
				return 0
			}
			exe = exe || o.is("-x", "--exec")
		}
		if len(rest) == 0 {
			return 0
		}
		if exe {
			return execRun(wrapRun{argv: rest, env: env})
		}
		return execRun(wrapRun{argv: []string{"/bin/sh", "-c", strings.Join(rest, " ")}, env: env})
	case "xargs":
		return runXargs(args, env)
	case "find":
		return runFind(args, env)
	}
	return unparsed(name, args, "no emulation")
}

// execShell runs the real shell (dash or bash) as name with args.
func execShell(real, name string, args, env []string) int {
	err := syscall.Exec(real, append([]string{name}, args...), env)
	fmt.Fprintln(os.Stderr, "bdiff-wrap:", err)
	return 126
}

// runEnv is GNU env 9.1.
func runEnv(args, env []string) int {
	g := gnuOpts{short: "C:iS:u:v0", long: map[string]int{"ignore-environment": 0, "null": 0, "unset": 1,
		"chdir": 1, "split-string": 1, "debug": 0, "help": 0, "version": 0, "block-signal": 2,
		"default-signal": 2, "ignore-signal": 2, "list-signal-handling": 0}}
	dir, clear := "", false
	var unset []string
	for restart := 0; ; restart++ {
		if restart > 16 {
			return unparsed("env", args, "-S nested too deep")
		}
		opts, rest, bad := g.parse(args)
		if bad != "" {
			return getoptFailed("env", args, bad)
		}
		split := -1
		for k, o := range opts {
			switch {
			case o.is("--help", "--version"):
				return 0
			case o.is("-i", "--ignore-environment"):
				clear = true
			case o.is("-u", "--unset"):
				unset = append(unset, o.val)
			case o.is("-C", "--chdir"):
				dir = o.val
			case o.is("-S", "--split-string"):
				split = k
			}
			if split >= 0 {
				break
			}
		}
		if split < 0 {
			args = rest
			break
		}
		// getopt restarts on the split words followed by the words not
		// yet read: find where they start by parsing up to the -S.
		words, why := envSplit(opts[split].val, env)
		if why != "" {
			return 125 // env refuses the string
		}
		left := wordsAfter(g, args, split)
		if left == nil {
			return unparsed("env", args, "cannot tell the words after -S")
		}
		args = append(words, left...)
	}
	if len(args) > 0 && args[0] == "-" {
		clear, args = true, args[1:]
	}
	if clear {
		env = nil
	}
	for _, n := range unset {
		env = dropEnv(env, n)
	}
	for len(args) > 0 && strings.Contains(args[0], "=") {
		n, _, _ := strings.Cut(args[0], "=")
		env = append(dropEnv(env, n), args[0])
		args = args[1:]
	}
	if len(args) == 0 {
		return 0
	}
	return execRun(wrapRun{argv: args, env: env, dir: dir})
}

// wordsAfter returns the words of args after the option at index n of
// what g.parse returns (nil when it cannot tell).
func wordsAfter(g gnuOpts, args []string, n int) []string {
	for i := 1; i <= len(args); i++ {
		opts, _, bad := g.parse(args[:i])
		if bad == "" && len(opts) > n {
			return append([]string{}, args[i:]...)
		}
	}
	return nil
}

func dropEnv(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if n, _, _ := strings.Cut(kv, "="); n != name {
			out = append(out, kv)
		}
	}
	return out
}

// envSplit splits s as env -S does (coreutils env.c): blanks separate,
// '…' and "…" quote, backslash escapes, ${NAME} expands, # starts a
// comment at a word's start, \c ends the string. It returns why env
// refuses s, if it does.
func envSplit(s string, env []string) (words []string, why string) {
	var cur strings.Builder
	have := false
	sq, dq := false, false
	get := func(n string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, n+"="); ok {
				return v
			}
		}
		return ""
	}
	end := func() {
		if have {
			words = append(words, cur.String())
		}
		cur.Reset()
		have = false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case sq:
			if ch == '\'' {
				sq = false
				continue
			}
			if ch == '\\' && i+1 < len(s) && (s[i+1] == '\\' || s[i+1] == '\'') {
				i++
				ch = s[i]
			}
			cur.WriteByte(ch)
		case ch == '\'' && !dq:
			sq, have = true, true
		case ch == '"':
			dq, have = !dq, true
		case !dq && strings.IndexByte(" \t\n\v\f\r", ch) >= 0:
			end()
		case ch == '#' && !dq && !have:
			return words, ""
		case ch == '\\':
			if i+1 >= len(s) {
				return nil, "trailing backslash"
			}
			i++
			switch e := s[i]; e {
			case 'c':
				if dq {
					return nil, "\\c in double quotes"
				}
				end()
				return words, ""
			case '_':
				if dq {
					cur.WriteByte(' ')
				} else {
					end()
				}
			case 'f':
				cur.WriteByte('\f')
			case 'n':
				cur.WriteByte('\n')
			case 'r':
				cur.WriteByte('\r')
			case 't':
				cur.WriteByte('\t')
			case 'v':
				cur.WriteByte('\v')
			case '#', '$', '"', '\'', '\\':
				cur.WriteByte(e)
			default:
				return nil, "invalid escape"
			}
			have = true
		case ch == '$':
			if i+1 >= len(s) || s[i+1] != '{' {
				return nil, "$ without {"
			}
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				return nil, "unterminated ${"
			}
			n := s[i+2 : i+j]
			if !ValidEnvName(n) {
				return nil, "bad variable name"
			}
			cur.WriteString(get(n))
			have = true
			i += j
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if sq || dq {
		return nil, "unterminated quote"
	}
	end()
	return words, ""
}

// runXargs is GNU xargs 4.9 (the common options).
func runXargs(args, env []string) int {
	opts, rest, bad := gnuOpts{short: "0a:E:e::i::I:l::L:n:oprs:txP:d:", long: map[string]int{"null": 0,
		"arg-file": 1, "delimiter": 1, "eof": 2, "replace": 2, "max-lines": 2, "max-args": 1, "open-tty": 0,
		"interactive": 0, "no-run-if-empty": 0, "max-chars": 1, "show-limits": 0, "verbose": 0, "exit": 0,
		"max-procs": 1, "process-slot-var": 1, "help": 0, "version": 0}}.parse(args)
	if bad != "" {
		return getoptFailed("xargs", args, bad)
	}
	var in io.Reader = os.Stdin
	delim, repl, perLine, n, noEmpty := -1, "", 0, 0, false
	for _, o := range opts {
		switch {
		case o.is("--help", "--version"):
			return 0
		case o.is("-0", "--null"):
			delim = 0
		case o.is("-d", "--delimiter"):
			if len(o.val) != 1 {
				return unparsed("xargs", args, "delimiter "+o.val)
			}
			delim = int(o.val[0])
		case o.is("-a", "--arg-file"):
			f, err := os.Open(o.val)
			if err != nil {
				return 1
			}
			defer f.Close()
			in = f
		case o.is("-I"), o.is("-i", "--replace"):
			repl = o.val
			if repl == "" && !o.is("-I") {
				repl = "{}"
			}
			perLine = 1
		case o.is("-L", "-l", "--max-lines"):
			perLine = 1
			fmt.Sscan(o.val, &perLine)
		case o.is("-n", "--max-args"):
			fmt.Sscan(o.val, &n)
		case o.is("-r", "--no-run-if-empty"):
			noEmpty = true
		case o.is("-E", "-e", "--eof", "-p", "--interactive"):
			return unparsed("xargs", args, "option "+o.name)
		}
	}
	if len(rest) == 0 {
		rest = []string{"echo"}
	}
	data, _ := io.ReadAll(io.LimitReader(in, 1<<16))
	var items, lines [][]string
	if delim >= 0 {
		for _, it := range strings.Split(string(data), string(rune(delim))) {
			items = append(items, []string{it})
		}
		if len(items) > 0 && items[len(items)-1][0] == "" {
			items = items[:len(items)-1]
		}
		lines = items
	} else if repl != "" {
		for _, l := range strings.Split(string(data), "\n") {
			if l = strings.TrimLeft(l, " \t"); l != "" {
				lines = append(lines, []string{l})
			}
		}
	} else {
		sc := bufio.NewScanner(strings.NewReader(string(data)))
		for sc.Scan() {
			ws, ok := xargsWords(sc.Text())
			if !ok {
				return unparsed("xargs", args, "unmatched quote in the input")
			}
			if len(ws) > 0 {
				lines = append(lines, ws)
			}
		}
	}
	if repl != "" {
		for _, l := range lines {
			argv := make([]string, len(rest))
			for i, w := range rest {
				argv[i] = strings.ReplaceAll(w, repl, l[0])
			}
			runChild(wrapRun{argv: argv, env: env, data: true})
		}
		return 0
	}
	var groups [][]string
	var cur []string
	curLines := 0
	for _, l := range lines {
		for _, w := range l {
			cur = append(cur, w)
			if n > 0 && len(cur) == n {
				groups, cur = append(groups, cur), nil
			}
		}
		curLines++
		if perLine > 0 && curLines == perLine && len(cur) > 0 {
			groups, cur, curLines = append(groups, cur), nil, 0
		}
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	if len(groups) == 0 && !noEmpty {
		groups = [][]string{nil}
	}
	for _, g := range groups {
		runChild(wrapRun{argv: append(append([]string{}, rest...), g...), env: env, data: len(g) > 0})
	}
	return 0
}

// xargsWords splits one input line as xargs does without -0/-d: blanks
// separate, '…' and "…" quote (no newline inside), \ escapes a character.
func xargsWords(l string) ([]string, bool) {
	var out []string
	var cur strings.Builder
	have := false
	var q byte
	for i := 0; i < len(l); i++ {
		ch := l[i]
		switch {
		case q != 0:
			if ch == q {
				q = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			q, have = ch, true
		case ch == '\\' && i+1 < len(l):
			i++
			cur.WriteByte(l[i])
			have = true
		case ch == ' ' || ch == '\t':
			if have {
				out = append(out, cur.String())
			}
			cur.Reset()
			have = false
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if q != 0 {
		return nil, false
	}
	if have {
		out = append(out, cur.String())
	}
	return out, true
}

// runFind walks find's start points (at most 64 files) and runs every
// -exec, -execdir, -ok and -okdir command for each file, whatever the
// tests before it say but -name when the expression has no -o, ! or ","
// (-ok and -okdir only when a line of stdin says y).
func runFind(args, env []string) int {
	i := 0
	for i < len(args) && (args[i] == "-H" || args[i] == "-L" || args[i] == "-P" || strings.HasPrefix(args[i], "-O") || args[i] == "-D") {
		if args[i] == "-D" {
			i++
		}
		i++
	}
	var starts []string
	for ; i < len(args) && !strings.HasPrefix(args[i], "-") && args[i] != "(" && args[i] != "!" && args[i] != ")" && args[i] != ","; i++ {
		starts = append(starts, args[i])
	}
	if len(starts) == 0 {
		starts = []string{"."}
	}
	type action struct {
		kind string
		cmd  []string
		plus bool
	}
	var acts []action
	var names []string // -name patterns, when the expression only ands its tests
	anded := true
	for ; i < len(args); i++ {
		switch args[i] {
		case "-name":
			if i+1 < len(args) {
				names = append(names, args[i+1])
			}
		case "-o", "-or", ",", "!", "-not":
			anded = false
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j] != ";" && !(args[j] == "+" && j > i+1 && args[j-1] == "{}") {
				j++
			}
			if j >= len(args) || j == i+1 {
				return 1 // find: missing argument to -exec
			}
			acts = append(acts, action{args[i], args[i+1 : j], args[j] == "+"})
			i = j
		case "-files0-from":
			return unparsed("find", args, "-files0-from")
		}
	}
	if len(acts) == 0 {
		return 0
	}
	var files []string
	for _, s := range starts {
		filepath.WalkDir(s, func(p string, d os.DirEntry, err error) error {
			if len(files) >= 64 {
				return filepath.SkipAll
			}
			for _, pat := range names {
				if ok, _ := filepath.Match(pat, filepath.Base(p)); !ok && anded {
					return nil
				}
			}
			files = append(files, p)
			return nil
		})
	}
	stdin := bufio.NewReader(os.Stdin)
	for _, a := range acts {
		dirMode := a.kind == "-execdir" || a.kind == "-okdir"
		if a.plus {
			if len(files) == 0 {
				continue
			}
			argv := append([]string{}, a.cmd[:len(a.cmd)-1]...)
			argv = append(argv, files...)
			runChild(wrapRun{argv: argv, env: env, data: true})
			continue
		}
		for _, f := range files {
			name, dir := f, ""
			if dirMode {
				dir, name = filepath.Dir(f), "./"+filepath.Base(f)
			}
			argv := make([]string, len(a.cmd))
			for k, w := range a.cmd {
				argv[k] = strings.ReplaceAll(w, "{}", name)
			}
			if a.kind == "-ok" || a.kind == "-okdir" {
				l, _ := stdin.ReadString('\n')
				if !strings.HasPrefix(strings.TrimLeft(l, " \t"), "y") && !strings.HasPrefix(strings.TrimLeft(l, " \t"), "Y") {
					continue
				}
			}
			runChild(wrapRun{argv: argv, env: env, dir: dir, data: strings.Contains(strings.Join(a.cmd, "\x00"), "{}")})
		}
	}
	return 0
}

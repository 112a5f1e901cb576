package policy

import (
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// envVal is one environment variable as a command will see it: its static
// value, or computed (an expansion the policy cannot see).
type envVal struct {
	val      string
	computed bool
	word     *syntax.Word // nil for Request.Env and env's NAME=VALUE words
}

// envGroup judges the variables one command gets together (a simple
// command's assignments, one export/declare, env's NAME=VALUE words, or the
// exec request's environment): values that programs run as code (PAGER,
// GIT_SSH_COMMAND, GIT_CONFIG_KEY_n/VALUE_n pairs, BASH_ENV, PS4, ...) are
// judged as the code they are. persistent records them for the rest of the
// script (GIT_CONFIG_* pairs may be split across statements).
func (c *checker) envGroup(group map[string]envVal, persistent bool) error {
	if len(group) == 0 {
		return nil
	}
	names := make([]string, 0, len(group))
	for k := range group {
		names = append(names, k)
	}
	sort.Strings(names) // deterministic: the first refusal is always the same one
	for _, name := range names {
		if err := c.envVar(name, group[name]); err != nil {
			return err
		}
	}
	// GIT_CONFIG_COUNT=n GIT_CONFIG_KEY_i=k GIT_CONFIG_VALUE_i=v is git -c k=v.
	view := func(name string) (envVal, bool) {
		if v, ok := group[name]; ok {
			return v, true
		}
		v, ok := c.env[name]
		return v, ok
	}
	for _, name := range names {
		idx, isKey := strings.CutPrefix(name, "GIT_CONFIG_KEY_")
		if !isKey {
			idx, isKey = strings.CutPrefix(name, "GIT_CONFIG_VALUE_")
		}
		if !isKey || idx == "" {
			continue
		}
		key, hasKey := view("GIT_CONFIG_KEY_" + idx)
		val, hasVal := view("GIT_CONFIG_VALUE_" + idx)
		if !hasKey || !hasVal {
			continue
		}
		if key.computed {
			return c.unsafe(RuleUnjudgeable, "GIT_CONFIG_KEY_%s is computed at run time; git may run its value as code", idx)
		}
		if err := c.gitSetting(key.val, val.val, val.computed, "GIT_CONFIG_KEY_"+idx); err != nil {
			return err
		}
	}
	if persistent {
		if c.env == nil {
			c.env = map[string]envVal{}
		}
		for k, v := range group {
			c.env[k] = v
		}
	}
	return nil
}

// plainMakeFlag reports a MAKEFLAGS word that only sets how make runs:
// flag letters (k, s, -j4, -l2), --jobs=N and the like.
func plainMakeFlag(w string) bool {
	switch strings.SplitN(w, "=", 2)[0] {
	case "--no-print-directory", "--print-directory", "--keep-going", "--silent", "--quiet", "--jobs",
		"--load-average", "--always-make", "--warn-undefined-variables", "--no-builtin-rules",
		"--no-builtin-variables", "--no-keep-going", "--output-sync", "--trace", "--", "-":
		return !strings.Contains(w, "=") || strings.Trim(strings.SplitN(w, "=", 2)[1], "0123456789.") == "" ||
			strings.HasPrefix(w, "--output-sync=") && strings.Trim(w[len("--output-sync="):], "abcdefghijklmnopqrstuvwxyz") == ""
	}
	f := strings.TrimPrefix(w, "-")
	return f != "" && strings.Trim(strings.TrimRight(f, "0123456789."), "jklsinwBrRtSq") == ""
}

// envVar judges one variable whose value some program runs or reads as code.
func (c *checker) envVar(name string, v envVal) error {
	computedErr := func(what string) error {
		return c.unsafe(RuleUnjudgeable, "%s is computed at run time (%s); %s", name, srcOf(v), what)
	}
	switch {
	case codeVars[name]:
		if v.computed {
			return computedErr("programs run it as a shell command")
		}
		if strings.TrimSpace(v.val) == "" {
			return nil
		}
		return c.nested(v.val)
	case name == "MAKEFLAGS" || name == "GNUMAKEFLAGS":
		// make reads these as its own options: --eval, -E, SHELL= and
		// .SHELLFLAGS= there run code as they do on make's command line.
		if v.computed {
			return computedErr("make reads it as its options")
		}
		for _, w := range strings.Fields(v.val) {
			if !plainMakeFlag(w) {
				return c.unsafe(RuleUnjudgeable, "%s passes make the option %s, which the policy does not read there; put it on make's command line", name, w)
			}
		}
		return nil
	case name == "MAKEFILES":
		// make reads the makefiles it names first.
		if v.computed {
			return computedErr("make reads the makefiles it names")
		}
		for _, w := range strings.Fields(v.val) {
			if _, isFd := fdPath(w); isFd || strings.HasPrefix(w, "/dev/") || strings.HasPrefix(w, "/proc/") {
				return c.unsafe(RuleUnjudgeable, "MAKEFILES=%s makes make read a makefile from stdin or a descriptor", w)
			}
		}
		return nil
	case name == "PARALLEL":
		// GNU parallel prepends it to its options.
		if v.computed || strings.TrimSpace(v.val) != "" {
			return c.unsafe(RuleUnjudgeable, "PARALLEL passes GNU parallel options the policy does not see; put them on parallel's command line")
		}
		return nil
	case name == "SHELL" || name == "PARALLEL_SHELL":
		// flock -c, script, GNU parallel and other programs run $SHELL
		// (parallel: $PARALLEL_SHELL) as the shell for their code: judged
		// as that program running code.
		if v.computed {
			return computedErr("flock -c, script and parallel run the program it names")
		}
		if strings.TrimSpace(v.val) == "" {
			return nil
		}
		return c.nested(Quote(v.val) + " -c :")
	case name == "BASH_ENV" || name == "ENV":
		// bash (BASH_ENV) and sh (ENV) source this file before the script.
		if v.word != nil && hasProcSubst(v.word) {
			return c.unsafe(RuleUnjudgeable, "%s names a process substitution, whose code bash would source", name)
		}
		if v.computed {
			if name == "ENV" {
				return nil // only interactive sh reads ENV
			}
			return computedErr("bash sources the file it names")
		}
		if strings.ContainsAny(v.val, "$`") {
			// bash expands the value ($(...) included) before it
			// sources the file it names.
			return c.unsafe(RuleUnjudgeable, "%s=%s: bash expands the value, running the substitutions in it, and sources the file it names", name, v.val)
		}
		if fd, isFd := fdPath(v.val); isFd || strings.HasPrefix(v.val, "/proc/") {
			_ = fd
			return c.unsafe(RuleUnjudgeable, "%s=%s makes the shell source code from stdin or a descriptor", name, v.val)
		}
		return c.execScript(v.val)
	case name == "PS4" || name == "PS1" || name == "PS2" || name == "PS3":
		// bash expands prompts ($(...) included) when it prints them:
		// PS4 for every command under `set -x`.
		if v.computed {
			return computedErr("bash runs the substitutions in it when it prints the prompt")
		}
		if !strings.ContainsAny(v.val, "$`") {
			return nil
		}
		return c.nested("cat <<__AGENTBE_PROMPT__\n" + v.val + "\n__AGENTBE_PROMPT__\n")
	case name == "GIT_CONFIG_PARAMETERS":
		return c.unsafe(RuleUnjudgeable, "GIT_CONFIG_PARAMETERS passes git settings the policy does not judge; use git -c key=value")
	case name == "GIT_CONFIG_GLOBAL" || name == "GIT_CONFIG_SYSTEM" || name == "GIT_CONFIG":
		if v.computed {
			return nil // a config file on disk, like .git/config
		}
		if _, isFd := fdPath(v.val); isFd || strings.HasPrefix(v.val, "/proc/") {
			return c.unsafe(RuleUnjudgeable, "%s=%s makes git read settings from stdin or a descriptor", name, v.val)
		}
	case name == "GIT_ALLOW_PROTOCOL":
		if v.computed || containsWord(v.val, ":", "ext") {
			return c.unsafe(RuleUnjudgeable, "GIT_ALLOW_PROTOCOL=%s allows git's ext:: transport, which runs commands", v.val)
		}
	case name == "TAR_OPTIONS":
		if v.computed {
			return computedErr("tar reads options from it, some of which run commands")
		}
		return c.nested("tar " + v.val)
	case name == "VIMINIT" || name == "EXINIT":
		if v.computed || strings.Contains(v.val, "!") || strings.Contains(v.val, "system(") {
			return c.unsafe(RuleUnjudgeable, "%s runs editor commands that can run shell commands", name)
		}
	}
	return nil
}

func srcOf(v envVal) string {
	if v.word != nil {
		return wordSource(v.word)
	}
	return v.val
}

// containsWord reports whether s, split at sep, has an element equal to w.
func containsWord(s, sep, w string) bool {
	for _, p := range strings.Split(s, sep) {
		if strings.TrimSpace(p) == w {
			return true
		}
	}
	return false
}

// assignGroup collects the named assignments of one command.
func assignGroup(as []*syntax.Assign) map[string]envVal {
	var g map[string]envVal
	for _, a := range as {
		if a.Name == nil || a.Naked || a.Array != nil || a.Index != nil {
			continue
		}
		if g == nil {
			g = map[string]envVal{}
		}
		v := envVal{word: a.Value}
		if a.Value != nil {
			i := wordValue(a.Value)
			v.val, v.computed = i.val, !i.ok
			if a.Append {
				v.computed = true // appended to a value the policy may not know
			}
		}
		g[a.Name.Value] = v
	}
	return g
}

// mapGroup is an exec request's environment as a group; names the executor
// drops (DeniedEnv) never reach the command and are not judged.
func mapGroup(env map[string]string) map[string]envVal {
	g := make(map[string]envVal, len(env))
	for k, v := range env {
		if !DeniedEnv(k) {
			g[k] = envVal{val: v}
		}
	}
	return g
}

var (
	// gitShellKeys are git settings whose value git runs as a shell command.
	gitShellKeys = set("core.sshcommand", "core.pager", "core.editor", "core.askpass", "core.gitproxy",
		"core.alternaterefscommand", "sequence.editor", "diff.external", "gpg.program",
		"uploadpack.packobjectshook", "sendemail.sendmailcmd", "sendemail.tocmd", "sendemail.cccmd",
		"imap.tunnel", "credential.helper", "core.fsmonitor")
	// gitShellNames are setting names (section.<sub>.name) run as shell
	// commands, by section.
	gitShellNames = map[string]map[string]bool{
		"diff":       set("command", "textconv"),
		"merge":      set("driver"),
		"filter":     set("clean", "smudge", "process"),
		"credential": set("helper"),
		"gpg":        set("program"),
		"difftool":   set("cmd"),
		"mergetool":  set("cmd"),
		"browser":    set("cmd"),
		"man":        set("cmd", "path"),
		"remote":     set("uploadpack", "receivepack"),
	}
	// gitGlobalValued are git's global options that take the next word.
	gitGlobalValued = set("-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env", "--exec-path", "--list-cmds")
	// gitCodeOptions are subcommand options whose value git runs as a shell
	// command.
	gitCodeOptions = map[string]map[string]bool{
		"rebase":        set("-x", "--exec"),
		"difftool":      set("-x", "--extcmd"),
		"grep":          set("--open-files-in-pager"),
		"clone":         set("-u", "--upload-pack"),
		"fetch":         set("--upload-pack"),
		"pull":          set("--upload-pack"),
		"ls-remote":     set("--upload-pack"),
		"push":          set("--receive-pack", "--exec"),
		"archive":       set("--exec"),
		"send-email":    set("--sendmail-cmd", "--to-cmd", "--cc-cmd", "--smtp-server"),
		"filter-branch": set("--env-filter", "--tree-filter", "--index-filter", "--parent-filter", "--msg-filter", "--commit-filter", "--tag-name-filter", "--setup"),
	}
)

// gitSetting judges one git setting (from -c, GIT_CONFIG_KEY_n, git config
// or an alias): a value git runs as a shell command is judged as one, one
// computed at run time cannot be, and enabling the ext:: transport (which
// runs commands) is refused.
func (c *checker) gitSetting(key, val string, computed bool, where string) error {
	k := strings.ToLower(key)
	section, rest, _ := strings.Cut(k, ".")
	name := rest
	if i := strings.LastIndexByte(rest, '.'); i >= 0 {
		name = rest[i+1:]
	}
	sub := ""
	if i := strings.LastIndexByte(key, '.'); i > len(section) {
		sub = key[len(section)+1 : i]
	}
	lv := strings.ToLower(strings.TrimSpace(val))
	switch {
	case section == "protocol" && name == "allow" && (sub == "ext" || sub == "" || strings.EqualFold(sub, "ext")):
		if computed || lv != "never" && (sub != "" || lv == "always") {
			return c.unsafe(RuleUnjudgeable, "%s enables git's ext:: transport, which runs commands", where)
		}
		return nil
	case section == "url" && strings.HasPrefix(strings.ToLower(sub), "ext::"):
		return c.unsafe(RuleUnjudgeable, "%s rewrites URLs to git's ext:: transport, which runs commands", where)
	case section == "alias":
		if computed {
			return c.unsafe(RuleUnjudgeable, "%s defines a git alias computed at run time", where)
		}
		if code, ok := strings.CutPrefix(strings.TrimSpace(val), "!"); ok {
			return c.nested(code)
		}
		return c.nested("git " + val)
	case section == "pager" && sub == "" || gitShellKeys[k] || sub != "" && gitShellNames[section][name]:
	default:
		return nil
	}
	if computed {
		return c.unsafe(RuleUnjudgeable, "%s sets %s, which git runs as a command, to a value computed at run time", where, key)
	}
	switch lv {
	case "", "true", "false", "yes", "no", "on", "off", "1", "0":
		return nil // a boolean (pager.<cmd>, core.fsmonitor), not a command
	}
	if section == "credential" {
		if code, ok := strings.CutPrefix(strings.TrimSpace(val), "!"); ok {
			return c.nested(code)
		}
		if !strings.Contains(val, "/") {
			return nil // git credential-<name>
		}
	}
	return c.nested(val)
}

// git judges what git runs besides itself: code-carrying settings (-c,
// --config-env, git config), subcommand options that take shell commands
// (rebase -x, filter-branch --tree-filter, --upload-pack, ...), submodule
// foreach and bisect run, and the ext:: transport.
func (c *checker) git(a args) error {
	i := 1
	for ; i < len(a.vals); i++ {
		if !a.ok[i] {
			return nil // the subcommand is computed: judged like any program
		}
		v := a.vals[i]
		if !strings.HasPrefix(v, "-") {
			break
		}
		opt, val, hasVal := strings.Cut(v, "=")
		if !hasVal && gitGlobalValued[opt] && opt != "-c" && opt != "--config-env" {
			i++
			continue
		}
		switch opt {
		case "-c":
			if i+1 >= len(a.vals) {
				return nil
			}
			i++
			if !a.ok[i] {
				return c.unsafe(RuleUnjudgeable, "git -c with a computed setting")
			}
			key, sval, _ := strings.Cut(a.vals[i], "=")
			if err := c.gitSetting(key, sval, false, "git -c "+key); err != nil {
				return err
			}
		case "--config-env":
			spec := val
			if !hasVal {
				if i+1 >= len(a.vals) {
					return nil
				}
				i++
				if !a.ok[i] {
					return c.unsafe(RuleUnjudgeable, "git --config-env with a computed setting")
				}
				spec = a.vals[i]
			}
			key, envName, _ := strings.Cut(spec, "=")
			v, known := c.env[envName]
			if err := c.gitSetting(key, v.val, !known || v.computed, "git --config-env "+key); err != nil {
				return err
			}
		}
	}
	for j := i; j < len(a.vals); j++ {
		if a.ok[j] && strings.HasPrefix(strings.ToLower(strings.TrimPrefix(a.vals[j], "--url=")), "ext::") {
			return c.unsafe(RuleUnjudgeable, "git's ext:: transport runs the command in the URL (%s)", a.vals[j])
		}
	}
	if i >= len(a.vals) {
		return nil
	}
	sub := a.vals[i]
	switch sub {
	case "config":
		return c.gitConfigCmd(a, i+1)
	case "submodule":
		for j := i + 1; j < len(a.vals); j++ {
			if a.ok[j] && a.vals[j] == "foreach" {
				var parts []string
				for k := j + 1; k < len(a.vals); k++ {
					if !a.ok[k] {
						return c.unsafe(RuleUnjudgeable, "git submodule foreach runs a command computed at run time")
					}
					if len(parts) == 0 && (a.vals[k] == "--recursive" || a.vals[k] == "-q" || a.vals[k] == "--quiet") {
						continue
					}
					parts = append(parts, a.vals[k])
				}
				return c.nested(strings.Join(parts, " "))
			}
		}
		return nil
	case "bisect":
		if i+1 < len(a.vals) && a.ok[i+1] && a.vals[i+1] == "run" {
			return c.simple(a.words[i+2:], surroundings{external: true}, nil)
		}
		return nil
	}
	opts := gitCodeOptions[sub]
	for j := i + 1; j < len(a.vals); j++ {
		if !a.ok[j] {
			continue
		}
		v := a.vals[j]
		if v == "--" {
			break
		}
		opt, val, hasVal := strings.Cut(v, "=")
		if !opts[opt] {
			// -x'cmd' and -Ocmd: a short option with its value attached.
			if len(v) > 2 && v[0] == '-' && v[1] != '-' && (opts[v[:2]] || sub == "grep" && v[:2] == "-O") {
				if err := c.nested(v[2:]); err != nil {
					return err
				}
			}
			continue
		}
		if !hasVal {
			if opt == "--open-files-in-pager" || j+1 >= len(a.vals) {
				continue
			}
			j++
			if !a.ok[j] {
				return c.unsafe(RuleUnjudgeable, "git %s %s runs a command computed at run time", sub, opt)
			}
			val = a.vals[j]
		}
		if err := c.nested(val); err != nil {
			return err
		}
	}
	return nil
}

// gitConfigCmd judges `git config [options] key value` and `git config set
// key value`, which store a setting every later git command obeys.
func (c *checker) gitConfigCmd(a args, i int) error {
	valued := set("-f", "--file", "--blob", "--type", "--default", "--comment", "--value")
	var ops []int
	for ; i < len(a.vals); i++ {
		if !a.ok[i] {
			ops = append(ops, i)
			continue
		}
		v := a.vals[i]
		switch {
		case v == "--":
		case valued[v]:
			i++
		case strings.HasPrefix(v, "-"):
			switch v {
			case "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool",
				"--unset", "--unset-all", "--list", "-l", "--remove-section", "--rename-section", "--show-origin", "--show-scope":
				return nil
			case "-e", "--edit":
				return nil // opens $EDITOR, judged as GIT_EDITOR/EDITOR
			}
		default:
			ops = append(ops, i)
		}
	}
	if len(ops) > 0 && a.ok[ops[0]] {
		switch a.vals[ops[0]] {
		case "get", "list", "unset", "remove-section", "rename-section", "edit":
			return nil
		case "set":
			ops = ops[1:]
		}
	}
	if len(ops) < 2 {
		return nil
	}
	if !a.ok[ops[0]] {
		return c.unsafe(RuleUnjudgeable, "git config with a computed key")
	}
	key := a.vals[ops[0]]
	return c.gitSetting(key, a.vals[ops[1]], !a.ok[ops[1]], "git config "+key)
}

// envLong are env's long options.
var envLong = set("--ignore-environment", "--null", "--unset", "--chdir", "--split-string", "--debug",
	"--help", "--version", "--block-signal", "--default-signal", "--ignore-signal",
	"--list-signal-handling", "--argv0")

// envWrapper parses env's options and NAME=VALUE words, judging the
// variables as a group and an -S string (split like a command line, with
// the words after it appended) as a script. It returns the index of the
// program env runs, or -1 when there is nothing more to judge.
func (c *checker) envWrapper(a args, x surroundings, sio *stmtIO) (int, error) {
	group := map[string]envVal{}
	split, hasSplit := "", false
	optsDone := false
	i := 1
	takeNext := func(what string) (string, error) {
		if i+1 >= len(a.words) {
			return "", nil
		}
		i++
		if !a.ok[i] {
			return "", c.unsafe(RuleUnjudgeable, "env %s with a computed value (%s)", what, wordSource(a.words[i]))
		}
		return a.vals[i], nil
	}
loop:
	for ; i < len(a.words) && !hasSplit; i++ {
		if !a.ok[i] {
			// NAME=$value: a computed variable; anything else is the program.
			if l, ok := a.words[i].Parts[0].(*syntax.Lit); ok {
				if name, _, found := strings.Cut(l.Value, "="); found {
					if strings.HasPrefix(name, "BASH_FUNC_") {
						return -1, c.unsafe(RuleUnjudgeable, "env %s= passes a function that bash imports", name)
					}
					if ValidEnvName(name) {
						group[name] = envVal{computed: true, word: a.words[i]}
					}
					continue
				}
			}
			break
		}
		v := a.vals[i]
		switch {
		case v == "--" && !optsDone:
			optsDone = true
		case strings.HasPrefix(v, "--") && !optsDone:
			opt, val, has := strings.Cut(v, "=")
			if !envLong[opt] {
				opt = longPrefix(opt, envLong) // getopt_long takes abbreviations: --spl, --u
			}
			switch opt {
			case "--split-string":
				if !has {
					var err error
					if val, err = takeNext("-S"); err != nil {
						return -1, err
					}
				}
				split, hasSplit = val, true
			case "--unset", "--chdir", "--argv0":
				if !has {
					i++
				}
			}
		case len(v) > 1 && v[0] == '-' && !optsDone:
			for j := 1; j < len(v); j++ {
				switch v[j] {
				case 'S':
					if rest := v[j+1:]; rest != "" {
						split, hasSplit = rest, true
					} else {
						val, err := takeNext("-S")
						if err != nil {
							return -1, err
						}
						split, hasSplit = val, true
					}
					continue loop
				case 'u', 'C', 'a':
					if j == len(v)-1 {
						i++
					}
					continue loop
				}
			}
		case v == "-":
		default:
			// env takes every word with = before the command as NAME=VALUE,
			// whatever the name: BASH_FUNC_ls%%=() { ...; } is a function
			// every bash it starts imports (ls then runs it).
			name, val, found := strings.Cut(v, "=")
			if !found {
				break loop
			}
			if strings.HasPrefix(name, "BASH_FUNC_") {
				return -1, c.unsafe(RuleUnjudgeable, "env %s= passes a function that bash imports", name)
			}
			if ValidEnvName(name) {
				group[name] = envVal{val: val}
			}
		}
	}
	if err := c.envGroup(group, false); err != nil {
		return -1, err
	}
	if !hasSplit {
		return i, nil
	}
	// env -S splits its string like a command line (\_ is a separator) and
	// runs it with the remaining words appended. env reads the split words
	// again as its own arguments (env -S '-i sudo id', -S '-S ...'), ends
	// the string at \c and skips a # comment, keeping the words after the
	// string: those are refused, not followed.
	if t := strings.TrimLeft(split, " \t\n\v\f\r"); strings.HasPrefix(t, "-") || strings.Contains(split, "#") || strings.Contains(split, `\c`) {
		return -1, c.unsafe(RuleUnjudgeable, "env -S %s: env reads its own options, a comment or \\c in the string", Quote(split))
	}
	code := strings.ReplaceAll(split, `\_`, " ")
	for ; i < len(a.words); i++ {
		if !a.ok[i] {
			return -1, c.unsafe(RuleUnjudgeable, "env -S with computed arguments (%s)", wordSource(a.words[i]))
		}
		code += " " + Quote(a.vals[i])
	}
	return -1, c.nestedIn(code, inheritedStdin(x, sio))
}

// Quote quotes s as one shell word: in single quotes, each single quote
// of s closing the quotes, escaped and reopening them.
func Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// make judges make's ways of taking code that is not a Makefile on disk:
// --eval, a Makefile read from stdin or a descriptor, and SHELL overrides.
func (c *checker) make(a args, x surroundings, sio *stmtIO) error {
	for i := 1; i < len(a.words); i++ {
		if !a.ok[i] {
			if hasProcSubst(a.words[i]) {
				return c.unsafe(RuleUnjudgeable, "make reads a Makefile from a process substitution")
			}
			continue
		}
		v := a.vals[i]
		switch {
		case v == "--":
			return nil
		case v == "--eval" || v == "-E" || strings.HasPrefix(v, "--eval="):
			return c.unsafe(RuleUnjudgeable, "make --eval runs make code given on the command line; put it in a Makefile")
		case strings.HasPrefix(v, "SHELL=") || strings.HasPrefix(v, ".SHELLFLAGS="):
			return c.unsafe(RuleUnjudgeable, "make %s changes the shell every recipe runs with", v[:strings.IndexByte(v, '=')])
		}
		file, isFile := "", false
		switch {
		case v == "-f" || v == "--file" || v == "--makefile":
			if i+1 >= len(a.words) {
				return nil
			}
			i++
			if !a.ok[i] {
				if hasProcSubst(a.words[i]) {
					return c.unsafe(RuleUnjudgeable, "make reads a Makefile from a process substitution")
				}
				continue
			}
			file, isFile = a.vals[i], true
		case strings.HasPrefix(v, "--file=") || strings.HasPrefix(v, "--makefile="):
			file, isFile = v[strings.IndexByte(v, '=')+1:], true
		case strings.HasPrefix(v, "-f") && len(v) > 2:
			file, isFile = v[2:], true
		}
		if !isFile {
			continue
		}
		if fd, isFd := fdPath(file); isFd {
			if fd != "0" || inheritedStdin(x, sio).stdinHdoc != nil {
				return c.unsafe(RuleUnjudgeable, "make reads its Makefile from a descriptor or heredoc, which cannot be judged; write it to a file")
			}
			if err := c.stdinCode("make", x, sio); err != nil {
				return err
			}
		} else if err := c.execScript(file); err != nil {
			return err
		}
	}
	return nil
}

// sed judges GNU sed scripts: the e command and the s///e flag run
// commands, w writes files. --sandbox turns all of them off.
func (c *checker) sed(a args) error {
	if a.has("--sandbox") {
		return nil
	}
	var scripts []*syntax.Word
	explicit := false
	for i := 1; i < len(a.words); i++ {
		if !a.ok[i] {
			continue
		}
		v := a.vals[i]
		switch {
		case v == "--":
			i = len(a.words)
		case v == "-e" || v == "--expression":
			explicit = true
			if i+1 < len(a.words) {
				i++
				scripts = append(scripts, a.words[i])
			}
		case strings.HasPrefix(v, "--expression="):
			explicit = true
			scripts = append(scripts, &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: strings.TrimPrefix(v, "--expression=")}}})
		case v == "-f" || v == "--file":
			explicit = true
			if i+1 < len(a.words) {
				i++
				if a.ok[i] {
					if _, isFd := fdPath(a.vals[i]); isFd {
						return c.unsafe(RuleUnjudgeable, "sed reads its script from stdin or a descriptor")
					}
				} else if hasProcSubst(a.words[i]) {
					return c.unsafe(RuleUnjudgeable, "sed reads its script from a process substitution")
				}
			}
		case strings.HasPrefix(v, "--file=") || strings.HasPrefix(v, "-f") && len(v) > 2 && !strings.HasPrefix(v, "--"):
			explicit = true
		case len(v) > 2 && v[0] == '-' && v[1] != '-' && strings.IndexByte(v, 'e') > 0:
			// -ne 'script', -es: e ends the cluster and takes a value.
			explicit = true
			j := strings.IndexByte(v, 'e')
			if j < len(v)-1 {
				scripts = append(scripts, &syntax.Word{Parts: []syntax.WordPart{&syntax.SglQuoted{Value: v[j+1:]}}})
			} else if i+1 < len(a.words) {
				i++
				scripts = append(scripts, a.words[i])
			}
		}
	}
	if !explicit {
		if ops := a.operands(set("-l", "--line-length", "-i", "-s")); len(ops) > 0 {
			scripts = append(scripts, a.words[ops[0]])
		}
	}
	for _, w := range scripts {
		if err := c.sedScript(sedText(w)); err != nil {
			return err
		}
	}
	return nil
}

// sedText is a sed script word with each expansion replaced by "x": data
// the policy cannot see can add text, but the e commands and w files
// written in the script itself are still found.
func sedText(w *syntax.Word) string {
	var b strings.Builder
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			b.WriteString(unescapeUnquoted(p.Value))
		case *syntax.SglQuoted:
			if p.Dollar {
				b.WriteString(decodeANSIC(p.Value))
			} else {
				b.WriteString(p.Value)
			}
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if l, ok := q.(*syntax.Lit); ok {
					b.WriteString(unescapeDouble(l.Value))
				} else {
					b.WriteString("x")
				}
			}
		default:
			b.WriteString("x")
		}
	}
	return b.String()
}

// sedScript scans a sed script for the commands that run programs (e,
// s///e) or write files (w, W, s///w).
func (c *checker) sedScript(s string) error {
	i := 0
	toEOL := func() string {
		j := strings.IndexByte(s[i:], '\n')
		if j < 0 {
			j = len(s) - i
		}
		out := s[i : i+j]
		i += j
		return strings.TrimSpace(out)
	}
	skipDelim := func(d byte) bool { // skip to the unescaped d, past it
		for i < len(s) {
			switch s[i] {
			case '\\':
				i += 2
				continue
			case d:
				i++
				return true
			case '\n':
				if d != '\n' {
					return false
				}
			}
			i++
		}
		return false
	}
	for i < len(s) {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == ';' || ch == '{' || ch == '}' || ch == '!':
			i++
			continue
		case ch >= '0' && ch <= '9' || ch == '$' || ch == ',' || ch == '~' || ch == '+':
			i++
			continue
		case ch == '/':
			i++
			if !skipDelim('/') {
				return nil
			}
			for i < len(s) && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
			continue
		case ch == '\\' && i+1 < len(s):
			d := s[i+1]
			i += 2
			if !skipDelim(d) {
				return nil
			}
			continue
		}
		i++ // the command letter
		switch ch {
		case '#', ':', 'a', 'i', 'c', 'b', 't', 'T', 'r', 'R', 'v', 'l', 'L', 'q', 'Q':
			if ch == ':' || ch == 'b' || ch == 't' || ch == 'T' || ch == 'v' || ch == 'l' || ch == 'L' || ch == 'q' || ch == 'Q' {
				for i < len(s) && s[i] != ';' && s[i] != '\n' && s[i] != '}' {
					i++
				}
				continue
			}
			toEOL()
		case 'w', 'W':
			if err := c.writePath(toEOL(), "sed w"); err != nil {
				return err
			}
		case 'e':
			cmd := toEOL()
			if cmd == "" {
				return c.unsafe(RuleUnjudgeable, "sed's e command runs the pattern space (data) as a command")
			}
			if err := c.nested(cmd); err != nil {
				return err
			}
		case 's', 'y':
			if i >= len(s) {
				return nil
			}
			d := s[i]
			i++
			if !skipDelim(d) { // the regex (s) or source characters (y)
				return nil
			}
			if !skipDelim(d) { // the replacement or target characters
				return nil
			}
			if ch == 'y' {
				continue
			}
			for i < len(s) && strings.IndexByte("gpiImMe0123456789", s[i]) >= 0 {
				if s[i] == 'e' {
					return c.unsafe(RuleUnjudgeable, "sed's s///e flag runs the substituted text as a command")
				}
				i++
			}
			if i < len(s) && s[i] == 'w' {
				i++
				if err := c.writePath(toEOL(), "sed s///w"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// editor judges ed/ex and vi/vim: commands they read from stdin (ed, ex,
// vim -e/-es) or take with -c/+cmd/--cmd, where `!cmd` runs a shell.
func (c *checker) editor(a args, x surroundings, sio *stmtIO, base string) error {
	if base == "red" {
		return nil // restricted ed: no shell commands
	}
	exMode := base == "ed" || base == "ex"
	for i := 1; i < len(a.words); i++ {
		if !a.ok[i] {
			continue
		}
		v := a.vals[i]
		code, has := "", false
		switch {
		case v == "-e" || v == "-E" || v == "-es" || v == "-Es" || v == "--headless":
			exMode = exMode || v != "--headless"
		case (v == "-c" || v == "--cmd" || v == "-S") && i+1 < len(a.words):
			i++
			if !a.ok[i] {
				return c.unsafe(RuleUnjudgeable, "%s %s with computed editor commands", base, v)
			}
			code, has = a.vals[i], v != "-S"
		case strings.HasPrefix(v, "+") && len(v) > 1:
			code, has = v[1:], true
		}
		if has {
			if err := c.exCommands(code, base); err != nil {
				return err
			}
		}
	}
	if !exMode {
		return nil
	}
	in := inheritedStdin(x, sio)
	if in.stdinHdoc != nil {
		body, ok := hdocText(in.stdinHdoc)
		if !ok {
			return c.unsafe(RuleUnjudgeable, "a heredoc with expansions is fed to %s", base)
		}
		return c.exCommands(body, base)
	}
	return c.stdinCode(base, x, sio)
}

// exCommands judges ed/ex commands: text after a `!` runs as a shell
// command; text entered with a/i/c is data.
func (c *checker) exCommands(script, prog string) error {
	input := false
	for _, line := range strings.Split(script, "\n") {
		t := strings.TrimSpace(line)
		if input {
			input = t != "."
			continue
		}
		t = strings.TrimLeft(t, ":")
		if cmd := strings.TrimLeft(t, "0123456789.,$;+-/' "); cmd == "a" || cmd == "i" || cmd == "c" {
			input = true
			continue
		}
		if strings.Contains(t, "system(") || strings.HasPrefix(t, "sh") || strings.HasPrefix(t, "term") {
			return c.unsafe(RuleUnjudgeable, "%s command %q runs a shell", prog, t)
		}
		if j := strings.IndexByte(t, '!'); j >= 0 {
			if err := c.nested(t[j+1:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// tclRun finds Tcl/expect commands that start programs: spawn, exec,
// system and open "|cmd".
var tclRun = regexp.MustCompile(`(?:^|[\s;\[{])(?:spawn|exec|system|open\s+["{]?\|)\s*([^;\n\]}]*)`)

// tclCode judges the programs a Tcl or expect script given on the command
// line starts (expect -c 'spawn sudo id').
func (c *checker) tclCode(code, prog string) error {
	for _, m := range tclRun.FindAllStringSubmatch(code, -1) {
		words := strings.Fields(strings.NewReplacer("{", " ", "}", " ", `"`, " ").Replace(m[1]))
		for len(words) > 0 && strings.HasPrefix(words[0], "-") {
			words = words[1:] // spawn -noecho, exec -ignorestderr --
		}
		if len(words) == 0 {
			continue
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			if strings.ContainsAny(w, "$[") {
				return c.unsafe(RuleUnjudgeable, "%s starts a program computed at run time (%s)", prog, strings.Join(words, " "))
			}
			quoted[i] = Quote(w)
		}
		if err := c.nested(strings.Join(quoted, " ")); err != nil {
			return err
		}
	}
	return nil
}

// maxLinkHops bounds following symlinks (the kernel's limit is 40).
const maxLinkHops = 40

// recordLinks remembers the links `ln` creates (LINK -> TARGET, absolute;
// "" for a target computed at run time), so a later `rm -rf link/` or a
// write through the link in the same command is judged where it lands.
func (c *checker) recordLinks(a args) {
	dir, ok := c.cwd()
	if !ok {
		return
	}
	symbolic := a.has("--symbolic") || a.hasShort('s')
	relative := a.has("--relative") || a.hasShort('r')
	noDir := a.has("--no-target-directory") || a.hasShort('T')
	ops := a.operands(set("-S", "--suffix", "-t", "--target-directory"))
	tdir := ""
	for i := 1; i+1 < len(a.vals); i++ {
		if a.ok[i] && (a.vals[i] == "-t" || a.vals[i] == "--target-directory") {
			tdir = a.vals[i+1]
		} else if a.ok[i] && strings.HasPrefix(a.vals[i], "--target-directory=") {
			tdir = strings.TrimPrefix(a.vals[i], "--target-directory=")
		}
	}
	if c.links == nil {
		c.links = map[string]string{}
	}
	add := func(target int, link string) {
		linkAbs := c.abs(link, dir)
		t := ""
		if a.ok[target] {
			t = a.vals[target]
			switch {
			case path.IsAbs(t):
				t = path.Clean(t)
			case symbolic && !relative:
				t = path.Join(path.Dir(linkAbs), t) // relative to the link
			default:
				t = c.abs(t, dir)
			}
		}
		c.links[linkAbs] = t
	}
	base := func(i int) string {
		if !a.ok[i] {
			return ""
		}
		return path.Base(a.vals[i])
	}
	switch {
	case tdir != "":
		for _, i := range ops {
			add(i, path.Join(tdir, base(i)))
		}
	case len(ops) == 1:
		add(ops[0], base(ops[0]))
	case len(ops) >= 2:
		last := ops[len(ops)-1]
		if !a.ok[last] {
			return
		}
		dest := a.vals[last]
		isDir := len(ops) > 2 || strings.HasSuffix(dest, "/")
		if !isDir && !noDir {
			c.visits++ // counted; the next statement looks at the budget
			c.fsCalls++
			if fi, err := os.Stat(c.abs(dest, dir)); err == nil && fi.IsDir() {
				isDir = true
			}
		}
		for _, i := range ops[:len(ops)-1] {
			if isDir {
				add(i, path.Join(dest, base(i)))
			} else {
				add(i, dest)
			}
		}
	}
}

// Paths the policy resolves on disk are bounded like the kernel bounds
// them (PATH_MAX, and ELOOP long before this depth): a longer or deeper
// path is refused as unjudgeable rather than walked.
const (
	maxPathBytes = 4096
	maxPathDepth = 256
)

// checkPathSize refuses a path too long or too deep to judge.
func (c *checker) checkPathSize(p string) error {
	if len(p) > maxPathBytes || strings.Count(p, "/") > maxPathDepth {
		return c.unsafe(RuleUnjudgeable, "the path %s is longer than %d bytes or deeper than %d components",
			shorten(p), maxPathBytes, maxPathDepth)
	}
	return nil
}

// shorten cuts a long path for a message.
func shorten(p string) string {
	if len(p) <= 80 {
		return p
	}
	return p[:60] + "..." + p[len(p)-17:]
}

// followLinks resolves absolute p through the links this command creates
// and the symlinks on disk, every component but the last (and the last
// too when last is set). ok is false when a link's target is computed at
// run time. A path that stays inside the boundary is returned unchanged.
// err is a refusal or errBudget/errSlow: each component looked at counts
// against the budget.
func (c *checker) followLinks(p string, last bool) (real string, ok bool, err error) {
	if err := c.checkPathSize(p); err != nil {
		return "", false, err
	}
	orig := p
	for hop := 0; hop < maxLinkHops && len(c.links) > 0; hop++ {
		changed := false
		for q := p; ; q = path.Dir(q) {
			if err := c.spend(1); err != nil {
				return "", false, err
			}
			if t, isLink := c.links[q]; isLink && (q != p || last) {
				if t == "" {
					return "", false, nil
				}
				rest := below(q, p)
				p, changed = path.Join(t, rest), true
				break
			}
			if q == "/" || q == "." {
				break
			}
		}
		if !changed {
			break
		}
		if err := c.checkPathSize(p); err != nil {
			return "", false, err
		}
	}
	p, err = c.diskPath(p, last)
	if err != nil {
		return "", false, err
	}
	if p != orig && c.inside(orig) && c.inside(p) {
		return orig, true, nil
	}
	return p, true, nil
}

// below is p relative to q, an ancestor of p or p itself (both clean and
// absolute): "." for p itself.
func below(q, p string) string {
	switch {
	case q == p:
		return "."
	case q == "/":
		return p[1:]
	}
	return p[len(q)+1:]
}

// fsEntry is what Lstat (and Readlink) told about one path.
type fsEntry struct {
	exists bool
	link   bool
	target string
}

// lstat is os.Lstat and, for a symlink, os.Readlink, remembered for the
// rest of the judgement; each system call counts as a visit.
func (c *checker) lstat(p string) (fsEntry, error) {
	if e, ok := c.fs[p]; ok {
		return e, nil
	}
	if err := c.spend(1); err != nil {
		return fsEntry{}, err
	}
	var e fsEntry
	c.fsCalls++
	if fi, err := os.Lstat(p); err == nil {
		e.exists = true
		if fi.Mode()&os.ModeSymlink != 0 {
			if err := c.spend(1); err != nil {
				return fsEntry{}, err
			}
			c.fsCalls++
			if t, err := os.Readlink(p); err == nil {
				e.link, e.target = true, t
			} else {
				e.exists = false
			}
		}
	}
	if c.fs == nil {
		c.fs = map[string]fsEntry{}
	}
	c.fs[p] = e
	return e, nil
}

// diskPath resolves the symlinks on disk in absolute p (the longest prefix
// that exists), leaving the last component alone unless last is set. It
// walks p once, component by component, like the kernel: a symlink's
// target replaces it and is resolved in turn, and what follows the first
// missing component is kept as written. Lookups are cached per judgement
// and counted against the budget; more than maxLinkHops symlinks (ELOOP)
// or a path grown past maxPathBytes is refused as unjudgeable.
func (c *checker) diskPath(p string, last bool) (string, error) {
	if err := c.checkPathSize(p); err != nil {
		return "", err
	}
	comps := strings.Split(p, "/")
	cur, hops := "/", 0
	for i := 0; i < len(comps); i++ {
		name := comps[i]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		if len(next) > maxPathBytes {
			return "", c.checkPathSize(next)
		}
		if i == len(comps)-1 && !last {
			return next, nil
		}
		if err := c.spend(1); err != nil {
			return "", err
		}
		e, err := c.lstat(next)
		if err != nil {
			return "", err
		}
		if !e.exists {
			return path.Join(append([]string{next}, comps[i+1:]...)...), nil
		}
		if !e.link {
			cur = next
			continue
		}
		if hops++; hops > maxLinkHops {
			return "", c.unsafe(RuleUnjudgeable, "the path %s goes through more than %d symlinks", shorten(p), maxLinkHops)
		}
		if strings.HasPrefix(e.target, "/") {
			cur = "/"
		}
		comps = append(strings.Split(e.target, "/"), comps[i+1:]...)
		i = -1
	}
	return cur, nil
}

// rmLinked judges rm -r of p (absolute abs) where it lands: through the
// parents' links always, through the last component's when p ends in /,
// /. or a glob (rm follows a symlink only then).
func (c *checker) rmLinked(p, abs string, glob bool) error {
	last := strings.HasSuffix(p, "/") || strings.HasSuffix(p, "/.") || strings.HasSuffix(p, "/\"")
	real, ok, err := c.followLinks(abs, last && !glob)
	if err != nil {
		return err
	}
	if !ok {
		return c.unsafe(RuleUnjudgeable, "rm -r %s goes through a symlink whose target is computed at run time", p)
	}
	if real != abs {
		p = p + " (through a symlink, " + real + ")"
	}
	return c.rmTarget(p, real, glob)
}

// Package systemd holds the systemd unit, its environment file and its
// installer. These tests check them against the real tools: systemd-analyze
// for the unit, the built agent-backend binary for every flag and variable
// the unit and the environment file give it, and bash and shellcheck for
// install.sh, which is also run end to end against a scratch root.
package systemd

import (
	"github.com/agentbe/agentbe-daemon/internal/testbin"
	"github.com/agentbe/agentbe-daemon/internal/testenv"

	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	unitFile    = "agentbe-daemon.service"
	envFile     = "agentbe-daemon.env"
	installFile = "install.sh"
	// binPath is where install.sh puts the binary and the unit runs it from.
	binPath = "/usr/local/bin/agent-backend"
)

func TestMain(m *testing.M) {
	testenv.OperatorUmask() // the operator's files, made as an operator would
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// unitDirectives reads a unit file into section → key → values (in order),
// joining backslash-continued lines as systemd does.
func unitDirectives(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]string{}
	section := ""
	var cont strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if cont.Len() == 0 {
			trimmed := strings.TrimSpace(line)
			if trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, ";") {
				continue
			}
		}
		if strings.HasSuffix(line, "\\") {
			cont.WriteString(strings.TrimSuffix(line, "\\"))
			cont.WriteString(" ")
			continue
		}
		cont.WriteString(line)
		line = strings.TrimSpace(cont.String())
		cont.Reset()
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = line[1 : len(line)-1]
			out[section] = map[string][]string{}
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || section == "" {
			t.Fatalf("%s:%d: not a key=value line in a section: %q", path, n, line)
		}
		out[section][strings.TrimSpace(k)] = append(out[section][strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return out
}

// one returns the single value of a directive, failing if it is absent or
// given more than once.
func one(t *testing.T, d map[string]map[string][]string, section, key string) string {
	t.Helper()
	v := d[section][key]
	if len(v) != 1 {
		t.Fatalf("[%s] %s: want exactly one value, got %q", section, key, v)
	}
	return v[0]
}

// commandWords splits an Exec*= value into words. systemd also honours
// quotes and prefixes like "-" or "+"; the unit uses neither, and this
// refuses them so that the check cannot silently misread a later change.
func commandWords(t *testing.T, line string) []string {
	t.Helper()
	if strings.ContainsAny(line, `"'`) || strings.ContainsAny(line[:1], "-+!@:|") {
		t.Fatalf("command line uses quotes or a prefix this test does not parse: %q", line)
	}
	return strings.Fields(line)
}

// flagValue returns the value after flag in args (the "--flag value" form
// the unit uses).
func flagValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("%s with a value not found in %q", flag, args)
	}
	return args[i+1]
}

func TestUnitVerifies(t *testing.T) {
	analyze := testenv.Command(t, "systemd", "systemd-analyze")
	bin := testbin.Path(t)
	src, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(binPath)) {
		t.Fatalf("%s does not run %s", unitFile, binPath)
	}
	// systemd-analyze verify checks that every Exec*= binary exists and is
	// executable, so the copy points at the freshly built binary instead of
	// /usr/local/bin. Nothing else changes.
	verify := func(t *testing.T, unit []byte) string {
		dir := t.TempDir()
		path := filepath.Join(dir, unitFile)
		if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte(binPath), []byte(bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(analyze, "verify", path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Sprintf("exit: %v\n%s", err, out)
		}
		return string(out)
	}
	t.Run("clean", func(t *testing.T) {
		// verify exits 0 on unknown keys and unparsable values (it only
		// warns), so any output at all is a failure.
		if out := verify(t, src); out != "" {
			t.Fatalf("systemd-analyze verify %s is not clean:\n%s", unitFile, out)
		}
	})
	t.Run("catches a typo", func(t *testing.T) {
		// The control for the check above: a misspelt value and an unknown
		// key must show up, or "no output" proves nothing.
		bad := bytes.Replace(src, []byte("ProtectSystem=strict"), []byte("ProtectSystem=strcit\nProtectSytem=strict"), 1)
		if bytes.Equal(bad, src) {
			t.Fatal("ProtectSystem=strict not found in the unit")
		}
		out := verify(t, bad)
		if !strings.Contains(out, "strcit") || !strings.Contains(out, "ProtectSytem") {
			t.Fatalf("systemd-analyze verify did not report the typos; it said:\n%s", out)
		}
	})
}

// TestUnitSecurityExposure keeps the hardening from eroding: systemd's own
// offline scoring must stay at or below 3.0 ("OK"; the unit scores 2.9 with
// systemd 252). What the score counts against the unit is what bwrap needs
// (user and other namespaces, @mount, an unobstructed /proc) and the network.
func TestUnitSecurityExposure(t *testing.T) {
	analyze := testenv.Command(t, "systemd", "systemd-analyze")
	bin := testbin.Path(t)
	src, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	score := func(t *testing.T, unit []byte) (string, error) {
		path := filepath.Join(t.TempDir(), unitFile)
		if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte(binPath), []byte(bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		// --threshold is on a 0-100 scale: 30 is an exposure of 3.0.
		out, err := exec.Command(analyze, "security", "--offline=true", "--threshold=30", "--no-pager", path).CombinedOutput()
		return string(out), err
	}
	if out, err := score(t, src); err != nil {
		t.Fatalf("systemd-analyze security: exposure above 3.0 (%v):\n%s", err, out)
	}
	// The control: without the capability and system-call restrictions the
	// score must cross the threshold, or the check above proves nothing.
	weak := regexp.MustCompile(`(?m)^(CapabilityBoundingSet|SystemCallFilter|ProtectSystem)=.*$`).ReplaceAll(src, nil)
	out, err := score(t, weak)
	if err == nil {
		t.Fatalf("a unit without CapabilityBoundingSet, SystemCallFilter and ProtectSystem passed the threshold:\n%s", out)
	}
	if !strings.Contains(out, "Overall exposure level") {
		t.Fatalf("systemd-analyze security failed for another reason than the score: %v\n%s", err, out)
	}
}

// TestUnitStructure checks the promises the unit's comments and the docs
// make, which systemd-analyze cannot know about.
func TestUnitStructure(t *testing.T) {
	d := unitDirectives(t, unitFile)
	want := map[string]string{
		"Type":            "notify",
		"NotifyAccess":    "main",
		"Restart":         "on-failure",
		"User":            "agentbe",
		"StateDirectory":  "agentbe",
		"ProtectSystem":   "strict",
		"ProtectHome":     "yes",
		"PrivateTmp":      "yes",
		"NoNewPrivileges": "yes",
		"KillMode":        "mixed",
		"ExecReload":      "/bin/kill -HUP $MAINPID",
	}
	for k, v := range want {
		if got := one(t, d, "Service", k); got != v {
			t.Errorf("%s=%s, want %s", k, got, v)
		}
	}
	for _, k := range []string{"WatchdogSec", "LimitNOFILE", "RestrictAddressFamilies", "SystemCallFilter"} {
		one(t, d, "Service", k)
	}
	// What bwrap needs, as the unit's comment promises.
	ns := strings.Fields(one(t, d, "Service", "RestrictNamespaces"))
	for _, n := range []string{"user", "mnt", "pid", "ipc", "uts", "net", "cgroup"} {
		if !slices.Contains(ns, n) {
			t.Errorf("RestrictNamespaces=%s does not allow %s, which bwrap --unshare-all creates", strings.Join(ns, " "), n)
		}
	}
	if !slices.Contains(strings.Fields(one(t, d, "Service", "SystemCallFilter")), "@mount") {
		t.Error("SystemCallFilter does not allow @mount: bwrap cannot mount its sandbox")
	}
	if !slices.Contains(strings.Fields(one(t, d, "Service", "RestrictAddressFamilies")), "AF_NETLINK") {
		t.Error("RestrictAddressFamilies lacks AF_NETLINK: bwrap cannot bring up lo in a new network namespace")
	}
	for _, k := range []string{"PrivateUsers", "ProtectHostname", "ProtectKernelTunables", "ProtectKernelLogs", "ProtectProc", "ProcSubset", "MemoryDenyWriteExecute"} {
		if v, ok := d["Service"][k]; ok {
			t.Errorf("%s=%s is set; the unit's comment explains why it breaks bwrap or the agent's commands", k, v)
		}
	}
	if got := one(t, d, "Install", "WantedBy"); got != "multi-user.target" {
		t.Errorf("WantedBy=%s", got)
	}

	// The token: a credential named "token", read from a root-only file and
	// passed as a file path; never a flag value or an environment variable.
	if got := one(t, d, "Service", "LoadCredential"); got != "token:/etc/agentbe/token" {
		t.Errorf("LoadCredential=%s, want token:/etc/agentbe/token", got)
	}
	for _, k := range []string{"Environment"} {
		for _, v := range d["Service"][k] {
			if strings.Contains(strings.ToUpper(v), "TOKEN") {
				t.Errorf("%s=%s puts the token in the environment", k, v)
			}
		}
	}

	start := commandWords(t, one(t, d, "Service", "ExecStart"))
	pre := commandWords(t, one(t, d, "Service", "ExecStartPre"))
	if len(start) < 2 || start[0] != binPath || start[1] != "daemon" {
		t.Fatalf("ExecStart=%q does not run %s daemon", start, binPath)
	}
	if slices.Contains(start, "--check-config") {
		t.Error("ExecStart has --check-config: the daemon would exit instead of serving")
	}
	// ExecStartPre must check exactly what ExecStart will run.
	if !slices.Contains(pre, "--check-config") {
		t.Fatalf("ExecStartPre=%q has no --check-config", pre)
	}
	if got := slices.DeleteFunc(slices.Clone(pre), func(s string) bool { return s == "--check-config" }); !slices.Equal(got, start) {
		t.Errorf("ExecStartPre without --check-config differs from ExecStart:\n pre:   %q\n start: %q", got, start)
	}
	if slices.Contains(start, "--auth-token") {
		t.Error("ExecStart passes --auth-token: the token would be visible in ps")
	}
	if got := flagValue(t, start, "--auth-token-file"); got != "${CREDENTIALS_DIRECTORY}/token" {
		t.Errorf("--auth-token-file %s, want ${CREDENTIALS_DIRECTORY}/token", got)
	}
	// The daemon's user is not root, so without --state-dir its state
	// would go to its home's .local/state/agentbe.
	if got := flagValue(t, start, "--state-dir"); got != "%S/agentbe" {
		t.Errorf("--state-dir %s is not the StateDirectory (%%S/agentbe)", got)
	}
	if got := flagValue(t, start, "--ssh-host-key"); !strings.HasPrefix(got, "%S/agentbe/") {
		t.Errorf("--ssh-host-key %s is not in the StateDirectory (%%S/agentbe/)", got)
	}
	// The workspace is the one writable path ProtectSystem=strict leaves.
	root := flagValue(t, start, "--root")
	if rw := d["Service"]["ReadWritePaths"]; !slices.ContainsFunc(rw, func(v string) bool {
		return slices.Contains(strings.Fields(strings.TrimPrefix(v, "-")), root)
	}) {
		t.Errorf("--root %s is not in ReadWritePaths=%q: the daemon could not write its workspace", root, rw)
	}
	if envf := one(t, d, "Service", "EnvironmentFile"); envf != "-/etc/agentbe/"+envFile {
		t.Errorf("EnvironmentFile=%s, want -/etc/agentbe/%s (where install.sh puts it)", envf, envFile)
	}
}

// TestUnitBoundsTasks: the daemon runs as an unprivileged user without a
// delegated cgroup (no Delegate=, and ProtectControlGroups=yes makes the
// cgroup file system read-only for it), so it cannot give a command the
// per-command pids.max its docs describe: it logs "no pids cgroup" and runs
// commands without a process bound. What stops a fork bomb in an agent's
// command from taking the host's process table is the unit's own TasksMax=,
// which must therefore be a number: systemd's default is 15% of
// kernel.pid_max, which systemd raises to 4194304 on 64-bit machines (about
// 629,000 tasks).
func TestUnitBoundsTasks(t *testing.T) {
	d := unitDirectives(t, unitFile)
	v, ok := d["Service"]["TasksMax"]
	if !ok || len(v) != 1 {
		t.Fatalf("TasksMax=%q: the service's tasks are bounded only by systemd's default (15%% of kernel.pid_max)", v)
	}
	n, err := strconv.Atoi(v[0])
	if err != nil {
		t.Fatalf("TasksMax=%s is not a number of tasks (infinity or a percentage of kernel.pid_max leaves a fork bomb the host's process table)", v[0])
	}
	// At least one command's default bound (--exec-max-processes 1024)
	// beside the daemon's own threads and Chromium's; at most a small part
	// of the 32768 pids a default kernel.pid_max allows.
	if n < 2048 || n > 16384 {
		t.Errorf("TasksMax=%d, want between 2048 and 16384", n)
	}
	if _, ok := d["Service"]["Delegate"]; ok && one(t, d, "Service", "ProtectControlGroups") == "yes" {
		t.Error("Delegate= with ProtectControlGroups=yes: the delegated cgroup would be read-only for the daemon")
	}
}

// envFileVars parses the environment file: the variables it sets, and the
// ones it shows commented out as examples. Any other line is an error, so
// a stray word cannot hide from systemd's parser or from this test.
func envFileVars(t *testing.T) (set [][2]string, examples []string) {
	t.Helper()
	data, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	assign := regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=(.*)$`)
	for n, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "#"):
			if m := assign.FindStringSubmatch(strings.TrimPrefix(line, "#")); m != nil {
				examples = append(examples, m[1])
			}
		default:
			m := assign.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("%s:%d: neither a comment nor NAME=value: %q", envFile, n+1, line)
			}
			if strings.ContainsAny(m[2], `"'$\ `) {
				t.Fatalf("%s:%d: %q needs quoting rules systemd and a shell read differently", envFile, n+1, line)
			}
			set = append(set, [2]string{m[1], m[2]})
		}
	}
	if len(set) == 0 {
		t.Fatalf("%s sets no variable", envFile)
	}
	return set, examples
}

// TestEnvFileVariablesAreKnown: every variable the environment file sets or
// shows is one the daemon reads (as listed by `daemon --help`). The daemon
// ignores unknown AGENTBE_* variables, so a misspelt one would silently do
// nothing.
func TestEnvFileVariablesAreKnown(t *testing.T) {
	bin := testbin.Path(t)
	help, err := exec.Command(bin, "daemon", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("daemon --help: %v\n%s", err, help)
	}
	known := map[string]bool{}
	// A list of names may wrap across lines of the help's column.
	for _, m := range regexp.MustCompile(`\[env\s+([A-Z0-9_,\s]+)\]`).FindAllStringSubmatch(string(help), -1) {
		for _, name := range strings.Split(m[1], ",") {
			known[strings.TrimSpace(name)] = true
		}
	}
	if !known["AGENTBE_ROOT"] || !known["AGENTBE_BIND"] {
		t.Fatalf("could not read the variable names from daemon --help:\n%s", help)
	}
	set, examples := envFileVars(t)
	for _, kv := range set {
		if !known[kv[0]] {
			t.Errorf("%s sets %s, which the daemon does not read", envFile, kv[0])
		}
		if strings.Contains(kv[0], "TOKEN") {
			t.Errorf("%s sets %s: the token belongs in /etc/agentbe/token", envFile, kv[0])
		}
	}
	for _, name := range examples {
		if !known[name] {
			t.Errorf("%s shows %s as an example, which the daemon does not read", envFile, name)
		}
	}
}

// TestExecLinesAcceptedByCheckConfig runs the unit's ExecStart flags, with
// the environment file's variables, through the built binary's
// --check-config, as ExecStartPre does on a real machine. systemd's
// substitutions are done by hand: ${CREDENTIALS_DIRECTORY} becomes a
// directory holding a token file, %S a scratch state directory, and the
// workspace a scratch directory.
func TestExecLinesAcceptedByCheckConfig(t *testing.T) {
	bin := testbin.Path(t)
	d := unitDirectives(t, unitFile)
	start := commandWords(t, one(t, d, "Service", "ExecStart"))
	pre := commandWords(t, one(t, d, "Service", "ExecStartPre"))
	set, _ := envFileVars(t)

	tmp := t.TempDir()
	creds := filepath.Join(tmp, "credentials")
	state := filepath.Join(tmp, "state")
	workspace := filepath.Join(tmp, "workspace")
	for _, dir := range []string{creds, state, workspace} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	token := filepath.Join(creds, "token")
	if err := os.WriteFile(token, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unitRoot := flagValue(t, start, "--root")
	substitute := func(words []string) []string {
		out := make([]string, len(words))
		for i, w := range words {
			w = strings.ReplaceAll(w, "${CREDENTIALS_DIRECTORY}", creds)
			w = strings.ReplaceAll(w, "%S", state)
			if w == unitRoot {
				w = workspace
			}
			if strings.Contains(w, "$") || strings.Contains(w, "%") {
				t.Fatalf("unit word %q uses a substitution this test does not make", words[i])
			}
			out[i] = w
		}
		return out
	}
	// Only the environment file's variables: an AGENTBE_* variable in the
	// test runner's environment must not make the check pass or fail.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp}
	for _, kv := range set {
		env = append(env, kv[0]+"="+kv[1])
	}
	run := func(args []string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	for name, words := range map[string][]string{
		"ExecStartPre":               pre,
		"ExecStart + --check-config": append(slices.Clone(start), "--check-config"),
	} {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, err := run(substitute(words[1:]))
			if err != nil {
				t.Fatalf("%s %q --check-config: %v\nstderr: %s", bin, words[1:], err, stderr)
			}
			// The effective configuration shows the unit's flags and the
			// environment file's values took effect.
			for _, line := range []string{
				fmt.Sprintf("root: %q", workspace),
				fmt.Sprintf("auth-token-file: %q", token),
				`auth-token: "[redacted]"`,
				fmt.Sprintf("ssh-host-key: %q", filepath.Join(state, "agentbe", "ssh_host_ed25519_key")),
				fmt.Sprintf("state-dir: %q", filepath.Join(state, "agentbe")),
			} {
				if !strings.Contains(stdout, line+"\n") {
					t.Errorf("effective config lacks %s:\n%s", line, stdout)
				}
			}
			for _, kv := range set {
				key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(kv[0], "AGENTBE_"), "_", "-"))
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `: "?` + regexp.QuoteMeta(kv[1]) + `"?$`).MatchString(stdout) {
					t.Errorf("%s=%s from %s is not in the effective config:\n%s", kv[0], kv[1], envFile, stdout)
				}
			}
			if strings.Contains(stdout, "0123456789abcdef") {
				t.Error("--check-config printed the token")
			}
		})
	}

	t.Run("with the SSH port's example enabled", func(t *testing.T) {
		// The environment file's commented SSH port lines, with a loopback
		// address and a scratch authorized_keys in place of /etc's.
		keys := filepath.Join(tmp, "authorized_keys")
		line := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGgsVnv2VQ1yjzNyn8UUvakqHJRu6VzdtcCSuFyZ2P2F test\n"
		if err := os.WriteFile(keys, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		saved := env
		defer func() { env = saved }()
		env = append(slices.Clone(saved), "AGENTBE_SSH_LISTEN="+addr, "AGENTBE_SSH_AUTHORIZED_KEYS="+keys,
			"AGENTBE_SSH_MAX_AUTH_TRIES=6", "AGENTBE_SSH_LOGIN_GRACE_TIME=30s")
		stdout, stderr, err := run(substitute(pre[1:]))
		if err != nil {
			t.Fatalf("--check-config with the SSH port: %v\nstderr: %s", err, stderr)
		}
		for _, want := range []string{fmt.Sprintf("ssh-listen: %q", addr), fmt.Sprintf("ssh-authorized-keys: %q", keys), `ssh-login-grace-time: "30s"`} {
			if !strings.Contains(stdout, want+"\n") {
				t.Errorf("effective config lacks %s:\n%s", want, stdout)
			}
		}
	})

	t.Run("fails without the credential", func(t *testing.T) {
		// The control: with the environment file's non-loopback bind, a
		// missing token must fail the check, which is what keeps a broken
		// LoadCredential= from starting an open daemon.
		if err := os.Remove(token); err != nil {
			t.Fatal(err)
		}
		_, stderr, err := run(substitute(pre[1:]))
		if err == nil {
			t.Fatal("--check-config passed without the token file")
		}
		if !strings.Contains(stderr, "auth-token-file") {
			t.Errorf("the error does not name --auth-token-file: %s", stderr)
		}
	})
}

func TestInstallScriptSyntax(t *testing.T) {
	if out, err := exec.Command("bash", "-n", installFile).CombinedOutput(); err != nil {
		t.Fatalf("bash -n %s: %v\n%s", installFile, err, out)
	}
	fi, err := os.Stat(installFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&0o111 == 0 {
		t.Errorf("%s is not executable (mode %v)", installFile, fi.Mode())
	}
	data, err := os.ReadFile(installFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("\nset -euo pipefail\n")) {
		t.Errorf("%s does not set -euo pipefail", installFile)
	}
}

func TestInstallScriptShellcheck(t *testing.T) {
	shellcheck := testenv.Command(t, "shellcheck", "shellcheck")
	if out, err := exec.Command(shellcheck, "--shell=bash", "--severity=style", installFile).CombinedOutput(); err != nil {
		t.Fatalf("shellcheck %s: %v\n%s", installFile, err, out)
	}
}

// TestInstallScriptRuns runs install.sh three times against a scratch root
// (DESTDIR) with stand-ins for the commands that would change the machine
// (useradd, getent, chown, systemctl), which record how they were called:
// a fresh install, a rerun that must change nothing, and an upgrade of the
// unit that must restart the service.
func TestInstallScriptRuns(t *testing.T) {
	tmp := t.TempDir()
	// agent-backend with agentbe-sandbox beside it, as make build leaves
	// them in bin/.
	built := filepath.Join(tmp, "bin")
	if err := os.MkdirAll(built, 0o755); err != nil {
		t.Fatal(err)
	}
	bin, helper := filepath.Join(built, "agent-backend"), filepath.Join(built, "agentbe-sandbox")
	for src, dst := range map[string]string{testbin.Path(t): bin, testbin.SandboxHelper(t): helper} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dest := filepath.Join(tmp, "root")
	stubs := filepath.Join(tmp, "stubs")
	calls := filepath.Join(tmp, "calls.log")
	if err := os.MkdirAll(stubs, 0o755); err != nil {
		t.Fatal(err)
	}
	stub := func(name, body string) {
		script := "#!/bin/sh\necho \"" + name + " $*\" >>" + calls + "\n" + body + "\n"
		if err := os.WriteFile(filepath.Join(stubs, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	userMarker := filepath.Join(tmp, "user-exists")
	stub("getent", "test -e "+userMarker)
	stub("useradd", "touch "+userMarker)
	stub("chown", "exit 0")
	stub("systemctl", "exit 0")

	var output string // install.sh's own output, of the last run
	run := func(t *testing.T) string {
		t.Helper()
		if err := os.WriteFile(calls, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", installFile, bin)
		cmd.Env = append(os.Environ(), "DESTDIR="+dest, "PATH="+stubs+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install.sh: %v\n%s", err, out)
		}
		output = string(out)
		log, err := os.ReadFile(calls)
		if err != nil {
			t.Fatal(err)
		}
		return string(log)
	}
	read := func(t *testing.T, rel string) ([]byte, os.FileMode) {
		t.Helper()
		p := filepath.Join(dest, rel)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return data, fi.Mode().Perm()
	}
	same := func(t *testing.T, rel, src string, mode os.FileMode) {
		t.Helper()
		got, gotMode := read(t, rel)
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s", rel, src)
		}
		if gotMode != mode {
			t.Errorf("%s has mode %v, want %v", rel, gotMode, mode)
		}
	}

	var token []byte
	t.Run("fresh install", func(t *testing.T) {
		log := run(t)
		same(t, "usr/local/bin/agent-backend", bin, 0o755)
		same(t, "usr/local/bin/agentbe-sandbox", helper, 0o755)
		// The binary's line names its version within that one line (the
		// version command's further lines, commit and Go, would break it).
		installed := regexp.MustCompile(`(?m)^install\.sh: installed ` + regexp.QuoteMeta(filepath.Join(dest, "usr/local/bin/agent-backend")) + ` \(agent-backend v[^\n]*\)$`)
		if !installed.MatchString(output) {
			t.Errorf("install.sh did not print the installed binary and its version on one line; output:\n%s", output)
		}
		same(t, "etc/systemd/system/agentbe-daemon.service", unitFile, 0o644)
		same(t, "etc/agentbe/agentbe-daemon.env", envFile, 0o644)
		var mode os.FileMode
		token, mode = read(t, "etc/agentbe/token")
		if !regexp.MustCompile(`^[0-9a-f]{64}\n$`).Match(token) {
			t.Errorf("token %q is not 64 hex digits and a newline", token)
		}
		if mode != 0o600 {
			t.Errorf("token has mode %v, want 0600", mode)
		}
		if fi, err := os.Stat(filepath.Join(dest, "srv/agentbe/workspace")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
			t.Errorf("workspace: %v %v", fi, err)
		}
		for _, call := range []string{
			"useradd --system --user-group --home-dir /var/lib/agentbe --no-create-home --shell /usr/sbin/nologin --comment agentbe-daemon agentbe",
			"chown -h agentbe:agentbe " + filepath.Join(dest, "srv/agentbe/workspace"),
			"chown root:root " + filepath.Join(dest, "etc/agentbe/token"),
			"systemctl daemon-reload",
			"systemctl enable --now agentbe-daemon.service",
			"systemctl restart agentbe-daemon.service",
			"systemctl is-active --quiet agentbe-daemon.service",
		} {
			if !strings.Contains(log, call+"\n") {
				t.Errorf("install.sh did not run %q; calls:\n%s", call, log)
			}
		}
	})
	t.Run("rerun changes nothing", func(t *testing.T) {
		envPath := filepath.Join(dest, "etc/agentbe/agentbe-daemon.env")
		edited := []byte("AGENTBE_PORT=4000\n")
		if err := os.WriteFile(envPath, edited, 0o644); err != nil {
			t.Fatal(err)
		}
		log := run(t)
		if got, _ := read(t, "etc/agentbe/token"); !bytes.Equal(got, token) {
			t.Error("a rerun replaced the token")
		}
		if got, _ := read(t, "etc/agentbe/agentbe-daemon.env"); !bytes.Equal(got, edited) {
			t.Error("a rerun overwrote the edited environment file")
		}
		if strings.Contains(log, "useradd") {
			t.Errorf("a rerun created the user again:\n%s", log)
		}
		if strings.Contains(log, "systemctl restart") {
			t.Errorf("a rerun with nothing new restarted the daemon:\n%s", log)
		}
		if !strings.Contains(log, "systemctl enable --now agentbe-daemon.service\n") {
			t.Errorf("a rerun did not make sure the service is enabled and started:\n%s", log)
		}
	})
	t.Run("upgrade restarts", func(t *testing.T) {
		unitPath := filepath.Join(dest, "etc/systemd/system/agentbe-daemon.service")
		if err := os.WriteFile(unitPath, []byte("[Service]\nExecStart=/old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		log := run(t)
		same(t, "etc/systemd/system/agentbe-daemon.service", unitFile, 0o644)
		if !strings.Contains(log, "systemctl daemon-reload\n") || !strings.Contains(log, "systemctl restart agentbe-daemon.service\n") {
			t.Errorf("a changed unit was not reloaded and restarted:\n%s", log)
		}
		if got, _ := read(t, "etc/agentbe/token"); !bytes.Equal(got, token) {
			t.Error("an upgrade replaced the token")
		}
	})
}

// TestInstallScriptHostileInput runs install.sh, as root does, where its
// paths hold spaces and where someone who could write the directories it
// manages planted symlinks at the names it writes: /etc/agentbe/token (a
// kept token would be chmod'ed and chowned through it, and systemd would
// read the token from wherever it points), /etc/agentbe/token.new (the new
// token would be written into the link's target) and the workspace (the
// chown to agentbe would follow it: the agent, as agentbe, would then own
// the target). Each symlink must be refused, and its target left as it was.
func TestInstallScriptHostileInput(t *testing.T) {
	base := filepath.Join(t.TempDir(), "with space")
	built := filepath.Join(base, "build dir")
	if err := os.MkdirAll(built, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(built, "agent-backend")
	b, err := os.ReadFile(testbin.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	stubs := filepath.Join(base, "stubs")
	if err := os.MkdirAll(stubs, 0o755); err != nil {
		t.Fatal(err)
	}
	// chown records its arguments, one per line, so a path with a space
	// shows up whole.
	for name, body := range map[string]string{
		"getent":    "exit 0",
		"useradd":   "exit 0",
		"chown":     `for a in "$@"; do printf '%s\n' "$a"; done >>"$CALLS"`,
		"systemctl": "exit 0",
	} {
		if err := os.WriteFile(filepath.Join(stubs, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	run := func(t *testing.T, plant func(dest string)) (dest, out, calls string, err error) {
		t.Helper()
		n++
		dest = filepath.Join(base, fmt.Sprintf("root %d", n))
		if err := os.MkdirAll(filepath.Join(dest, "etc/agentbe"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dest, "srv/agentbe"), 0o755); err != nil {
			t.Fatal(err)
		}
		plant(dest)
		callsFile := filepath.Join(base, fmt.Sprintf("calls %d", n))
		cmd := exec.Command("bash", installFile, bin)
		cmd.Env = append(os.Environ(), "DESTDIR="+dest, "CALLS="+callsFile, "PATH="+stubs+":"+os.Getenv("PATH"))
		o, err := cmd.CombinedOutput()
		c, _ := os.ReadFile(callsFile)
		return dest, string(o), string(c), err
	}
	victim := func(t *testing.T) (string, []byte) {
		p := filepath.Join(base, fmt.Sprintf("victim %d", n+1))
		content := []byte("the victim's own content\n")
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		return p, content
	}
	unchanged := func(t *testing.T, p string, content []byte) {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(p)
		if !bytes.Equal(got, content) || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s was changed through the symlink: mode %v, content %q", p, fi.Mode().Perm(), got)
		}
	}

	t.Run("spaces", func(t *testing.T) {
		dest, out, calls, err := run(t, func(string) {})
		if err != nil {
			t.Fatalf("install.sh: %v\n%s", err, out)
		}
		for _, rel := range []string{"usr/local/bin/agent-backend", "etc/agentbe/token", "etc/systemd/system/agentbe-daemon.service"} {
			if _, err := os.Stat(filepath.Join(dest, rel)); err != nil {
				t.Error(err)
			}
		}
		for _, p := range []string{filepath.Join(dest, "srv/agentbe/workspace"), filepath.Join(dest, "etc/agentbe/token")} {
			if !strings.Contains(calls, "\n"+p+"\n") {
				t.Errorf("chown was not given %q as one argument; it got:\n%s", p, calls)
			}
		}
	})
	t.Run("token is a symlink", func(t *testing.T) {
		target, content := victim(t)
		_, out, calls, err := run(t, func(dest string) {
			if err := os.Symlink(target, filepath.Join(dest, "etc/agentbe/token")); err != nil {
				t.Fatal(err)
			}
		})
		if err == nil || !strings.Contains(out, "symlink") {
			t.Errorf("install.sh accepted a symlinked token (err %v):\n%s", err, out)
		}
		if strings.Contains(calls, target) {
			t.Errorf("chown was given the target:\n%s", calls)
		}
		unchanged(t, target, content)
	})
	t.Run("token.new is a symlink", func(t *testing.T) {
		target, content := victim(t)
		dest, out, _, err := run(t, func(dest string) {
			if err := os.Symlink(target, filepath.Join(dest, "etc/agentbe/token.new")); err != nil {
				t.Fatal(err)
			}
		})
		unchanged(t, target, content)
		if err == nil {
			fi, lerr := os.Lstat(filepath.Join(dest, "etc/agentbe/token"))
			if lerr != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Errorf("token after install: not a regular 0600 file (%v)\n%s", lerr, out)
			}
		}
	})
	t.Run("workspace is a symlink", func(t *testing.T) {
		target := filepath.Join(base, "victim dir")
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		_, out, calls, err := run(t, func(dest string) {
			if err := os.Symlink(target, filepath.Join(dest, "srv/agentbe/workspace")); err != nil {
				t.Fatal(err)
			}
		})
		if err == nil || !strings.Contains(out, "symlink") {
			t.Errorf("install.sh accepted a symlinked workspace (err %v):\n%s", err, out)
		}
		if strings.Contains(calls, "workspace") {
			t.Errorf("chown was run on the symlinked workspace:\n%s", calls)
		}
	})
}

// TestMakeInstallPaths runs the Makefile's install and uninstall targets,
// the other way the binaries reach a machine, with DESTDIR and PREFIX that
// hold spaces and under umask 077: every command lands in
// DESTDIR/PREFIX/bin with mode 0755 (others run the binaries; only root
// writes them), whatever the umask, and uninstall removes exactly those.
// GO names no program, so install takes what bin/ holds, as under sudo
// without go on PATH.
func TestMakeInstallPaths(t *testing.T) {
	mk := testenv.Command(t, "make", "make")
	makefile, err := filepath.Abs("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(t.TempDir(), "a clone")
	commands := []string{"agent-backend", "agentbe-sandbox", "agentbe-bridge"}
	if err := os.MkdirAll(filepath.Join(base, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		if err := os.WriteFile(filepath.Join(base, "bin", c), []byte("#!/bin/sh\necho "+c+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dest := filepath.Join(t.TempDir(), "stage dir")
	prefix := "/opt/agent be"
	run := func(target string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", `umask 077 && exec "$0" "$@"`, mk, "-f", makefile, "-C", base, target,
			"GO=/nonexistent/go", "DESTDIR="+dest, "PREFIX="+prefix)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
	}
	run("install")
	bindir := filepath.Join(dest, prefix, "bin")
	for _, c := range commands {
		fi, err := os.Stat(filepath.Join(bindir, c))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s installed with mode %v, want 0755", c, fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat(bindir); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o755 {
		t.Errorf("%s has mode %v, want 0755", bindir, fi.Mode().Perm())
	}
	entries, err := os.ReadDir(filepath.Join(dest, "opt"))
	if err != nil || len(entries) != 1 || entries[0].Name() != "agent be" {
		t.Fatalf("the PREFIX with a space was split: %v %v", entries, err)
	}
	run("uninstall")
	left, err := os.ReadDir(bindir)
	if err != nil || len(left) != 0 {
		t.Errorf("uninstall left %v (%v)", left, err)
	}
}

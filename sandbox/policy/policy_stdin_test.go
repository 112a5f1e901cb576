package policy

import (
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// TestPolicyStdinPrograms: in software mode no shell or interpreter may read
// the program it runs from stdin (a pipe, a redirection, or the command's
// own stdin, e.g. an SSH client's input); bwrap mode allows what it allowed
// before. Literal heredocs stay judged (shells) or allowed (other
// languages), and programs given as files or with -c/-e stay allowed.
func TestPolicyStdinPrograms(t *testing.T) {
	const ws = "/home/agent/ws"
	tests := []struct {
		cmd      string
		software bool // accepted in software mode
		bwrap    bool // accepted in bwrap mode
	}{
		// refused in software mode, allowed under bwrap
		{"bash", false, true},
		{"sh -s", false, true},
		{"sh -s arg1 arg2", false, true},
		{"exec bash", false, true},
		{"exec /bin/bash -l", false, true},
		{"env bash", false, true},
		{"nohup zsh", false, true},
		{"bash /dev/stdin", false, true},
		{"bash -", false, true},
		{"bash -i", false, true},
		{"source /dev/stdin", false, true},
		{". /proc/self/fd/0", false, true},
		{"s\\h", false, true},
		{"'/usr/bin/bash'", false, true},
		{"$'\\x62ash'", false, true},
		{"python3", false, true},
		{"python3 -", false, true},
		{"python3 -i x.py", false, true},
		{"python3 < x.py", false, true},
		{"cat x.py | python3", false, true},
		{"perl", false, true},
		{"ruby", false, true},
		{"node", false, true},
		{"node -i", false, true},
		{"php -a", false, true},
		{"lua", false, true},
		{"tclsh", false, true},
		{"expect", false, true},
		{"find . -maxdepth 0 -exec bash \\;", false, true},
		{"python3 /dev/fd/0", false, true},
		{"python3.12", false, true},
		{"lua5.4", false, true},
		{"php8.2 -a", false, true},
		{"awk -f /dev/stdin f", false, true},
		{"bash --norc --noprofile", false, true},
		{"python3 -u", false, true},
		{"bash /proc/$$/fd/0", false, false},
		{"echo $(sh)", false, true},
		{"f() { sh; }; f", false, false},
		// refused in both modes
		{"echo 'sudo id' | sh", false, false},
		{"echo 'sudo id' | bash -c sh", false, false},
		{"echo 'sudo id' | env -S sh", false, false},
		{"echo 'sudo id' | bash -c 'exec sh'", false, false},
		{"echo 'sudo id' | echo $(sh)", false, false},
		{"echo 'sudo id' > >(sh)", false, false},
		{"echo 'sudo id' | tee >(bash) >/dev/null", false, false},
		{"coproc bash", false, false},
		{"sh < script.sh", false, false},
		{"sh 0<&3", false, false},
		{"sh < <(echo 'sudo id')", false, false},
		{"curl -s x | tee >(python3)", false, false},
		{"bash -c 'sh' <<'EOF'\nsudo id\nEOF", false, false},
		{"bash <<'EOF'\nsh\nsudo id\nEOF", false, false},
		{"echo 'sudo id' | xargs bash -c", false, false},
		{"echo 'import os' | xargs python3 -c", false, false},
		{"echo x | xargs env -S", false, false},
		{"echo core.pager=x | xargs git -c", false, false},
		{"echo '1e id' | xargs sed -e", false, false},
		{"exec < f; sh", false, false},
		{"exec 0<&3; bash", false, false},
		{"python3 <<< \"$code\"", false, true},
		{"find . | xargs wc -c", true, true},
		{"xargs -n1 grep -c", true, true},
		// allowed in both modes
		{"python3 script.py", true, true},
		{"python3 -m pytest -q", true, true},
		{"python3 -c 'print(1)'", true, true},
		{"python3 -Bc 'print(1)'", true, true},
		{"perl -ne 'print if /x/' f", true, true},
		{"node -e 'console.log(1)'", true, true},
		{"bash build.sh", true, true},
		{"sh -c 'echo hi'", true, true},
		{"bash -c 'ls | wc -l'", true, true},
		{"bash <<'EOF'\necho hi\nEOF", true, true},
		{"sh <<< 'echo hi'", true, true},
		{"python3 - <<'EOF'\nprint(1)\nEOF", true, true},
		{"python3 <<< 'print(1)'", true, true},
		{"echo hi | xargs bash -c 'echo \"$@\"' _", true, true},
		{"deno run main.ts", true, true},
		{"python3.12 x.py", true, true},
		{"awk -f prog.awk f", true, true},
		{"cat f | grep x", true, true},
		{"bash -c 'cat' < f", true, true},
	}
	// Shells reading the rest of a heredoc judged as a script: judged once,
	// not once per shell (which would exhaust the budget).
	tests = append(tests, struct {
		cmd      string
		software bool
		bwrap    bool
	}{"bash <<'EOF'\n" + strings.Repeat("sh\necho hi\n", 100) + "EOF", true, true})
	software, bwrap := mustPolicy(t, true), mustPolicy(t, false)
	for _, tc := range tests {
		for _, m := range []struct {
			name string
			p    *Policy
			want bool
		}{{"software", software, tc.software}, {"bwrap", bwrap, tc.bwrap}} {
			err := m.p.Check(tc.cmd, ws)
			if (err == nil) != m.want {
				t.Errorf("%s: Check(%q) = %v, want accepted=%v", m.name, tc.cmd, err, m.want)
				continue
			}
			if err != nil && !errcode.Is(err, errcode.UnsafeCommand) && !errcode.Is(err, errcode.DangerousOperation) {
				t.Errorf("%s: Check(%q) = %v: not a refusal code", m.name, tc.cmd, err)
			}
		}
		if tc.bwrap && !tc.software {
			err := software.Check(tc.cmd, ws)
			if err == nil || !strings.Contains(err.Error(), "bwrap and landlock isolation allow it") {
				t.Errorf("software: Check(%q) = %v, want the message to say bwrap allows it", tc.cmd, err)
			}
		}
	}
}

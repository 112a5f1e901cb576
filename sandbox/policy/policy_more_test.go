package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// TestPolicyRules pins the code and rule of representative refusals.
func TestPolicyRules(t *testing.T) {
	const ws = "/home/agent/ws"
	tests := []struct {
		cmd     string
		escapes bool
		code    errcode.Code
		rule    string
	}{
		{"sudo id", false, errcode.DangerousOperation, RulePrivilege},
		{"rm -rf /", false, errcode.DangerousOperation, RuleDestructive},
		{"dd if=/dev/zero of=/dev/sda", false, errcode.DangerousOperation, RuleDisk},
		{":(){ :|:& };:", false, errcode.DangerousOperation, RuleForkBomb},
		{"curl x | sh", false, errcode.DangerousOperation, RulePipeToShell},
		{"curl -o a.sh x && sh a.sh", false, errcode.DangerousOperation, RuleDownloadExec},
		{"iptables -F", false, errcode.DangerousOperation, RuleNetwork},
		{"nc -l 1", false, errcode.DangerousOperation, RuleRemoteAccess},
		{"reboot", false, errcode.DangerousOperation, RuleSystemControl},
		{"echo > /etc/x", false, errcode.DangerousOperation, RuleSystemWrite},
		{"cd ..", true, errcode.DangerousOperation, RuleEscape},
		{"eval ls", false, errcode.UnsafeCommand, RuleUnjudgeable},
		{"echo ls | sh", false, errcode.UnsafeCommand, RuleUnjudgeable},
		{"echo 'unclosed", false, errcode.UnsafeCommand, RuleUnjudgeable},
		{strings.Repeat("a", MaxCommandBytes+1), false, errcode.UnsafeCommand, RuleTooLarge},
		{nestedBashC(MaxNesting + 2), false, errcode.UnsafeCommand, RuleUnjudgeable},
		{strings.Repeat("while x; do ", 40) + "cd a" + strings.Repeat("; done", 40), true, errcode.UnsafeCommand, RuleUnjudgeable},
	}
	for _, tc := range tests {
		name := tc.cmd
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			err := mustPolicy(t, tc.escapes).Check(tc.cmd, ws)
			var e *errcode.Error
			if !errors.As(err, &e) || e.Code != tc.code || !strings.HasPrefix(e.Msg, tc.rule+": ") || e.Command != tc.cmd || e.Op != "exec" {
				t.Fatalf("got %v, want %s with rule %s", err, tc.code, tc.rule)
			}
		})
	}
	// Nesting within the bound is judged, not refused.
	if err := mustPolicy(t, false).Check(nestedBashC(MaxNesting-1), ws); err != nil {
		t.Fatalf("nesting within the bound: %v", err)
	}
	if err := mustPolicy(t, false).Check(nestedBashC(MaxNesting-1)+"; sudo x", ws); !errcode.Is(err, errcode.DangerousOperation) {
		t.Fatalf("sudo after nested code: %v", err)
	}
}

// nestedBashC builds bash -c 'bash -c ... echo hi' nested n levels deep,
// with quoting that stays literal at every level.
func nestedBashC(n int) string {
	s := "echo hi"
	for i := 0; i < n; i++ {
		s = "bash -c " + shellQuote(s)
	}
	return s
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func TestPolicyScopeAndCwd(t *testing.T) {
	p := mustPolicy(t, true)
	const ws, sub = "/w/ws", "/w/ws/a/b"
	for _, tc := range []struct {
		cmd  string
		dir  string
		pass bool
	}{
		{"cd ..", sub, true},
		{"cd ../..", sub, true},
		{"cd ../../..", sub, false},
		{"cat ../../x", sub, true},
		{"cat ../../../x", sub, false},
		{"ls ~", sub, true},       // HOME is the cwd
		{"ls ~/../..", sub, true}, // still inside
		{"ls ~/../../..", sub, false},
		{"rm -rf *", sub, true}, // a subdirectory, not the workspace
		{"rm -rf *", ws, false},
		{"rm -rf ..", sub, false},
	} {
		err := p.CheckDir(tc.cmd, tc.dir, ws)
		if (err == nil) != tc.pass {
			t.Errorf("CheckDir(%q, %s): %v, want pass=%v", tc.cmd, tc.dir, err, tc.pass)
		}
	}
}

// FuzzPolicy: whatever the input, Check returns nil or a refusal with a
// known code and rule, and never panics. The time bound is the policy's
// own (MaxCommandBytes, MaxNesting, maxVisits, maxJudgeTime); no timing is
// asserted. The seeds include the commands whose judgement once took
// seconds to minutes (costCases).
func FuzzPolicy(f *testing.F) {
	for _, name := range []string{"blocked.txt", "allowed.txt"} {
		for _, c := range readCorpus(f, name) {
			f.Add(c.command, c.escapeOnly)
		}
	}
	for _, c := range costCases {
		f.Add(c.cmd, true)
		f.Add(c.cmd, false)
	}
	software, bwrap := mustPolicy(f, true), mustPolicy(f, false)
	f.Fuzz(func(t *testing.T, cmd string, escapes bool) {
		p := bwrap
		if escapes {
			p = software
		}
		err := p.Check(cmd, corpusBoundary)
		if err == nil {
			return
		}
		var e *errcode.Error
		if !errors.As(err, &e) || (e.Code != errcode.DangerousOperation && e.Code != errcode.UnsafeCommand) || e.Command != cmd || !strings.Contains(e.Msg, ": ") {
			t.Fatalf("Check(%q) = %#v", cmd, err)
		}
	})
}

// TestRefusalText: both refusal codes get one wording, naming the code;
// other errors are not refusals.
func TestRefusalText(t *testing.T) {
	p := mustPolicy(t, true)
	tests := []struct {
		err  error
		want string
		ok   bool
	}{
		{p.Check("sudo id", "/w"), "Dangerous operation blocked (DANGEROUS_OPERATION): privilege-escalation: sudo runs commands with other privileges", true},
		{p.Check("eval ls", "/w"), "Dangerous operation blocked (UNSAFE_COMMAND): unjudgeable: eval runs code built at run time", true},
		{&errcode.Error{Code: errcode.EmptyCommand, Msg: "empty command"}, "", false},
		{errors.New("plain"), "", false},
	}
	for _, tc := range tests {
		got, ok := RefusalText(tc.err)
		if got != tc.want || ok != tc.ok {
			t.Errorf("RefusalText(%v) = %q, %v; want %q, %v", tc.err, got, ok, tc.want, tc.ok)
		}
	}
}

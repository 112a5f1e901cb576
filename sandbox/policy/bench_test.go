package policy

import "testing"

// BenchmarkPolicyCheck is the policy's cost per command, over both
// corpora.
func BenchmarkPolicyCheck(b *testing.B) {
	var cmds []string
	for _, name := range []string{"blocked.txt", "allowed.txt"} {
		for _, c := range readCorpus(b, name) {
			cmds = append(cmds, c.command)
		}
	}
	p := mustPolicy(b, true)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = p.Check(cmds[i%len(cmds)], corpusBoundary)
		i++
	}
}

// BenchmarkPolicyClientShape is the cost for the command shape every SSH
// client exec has.
func BenchmarkPolicyClientShape(b *testing.B) {
	p := mustPolicy(b, true)
	cmd := `HOME='/home/agent/ws' K='v' cd "/home/agent/ws" && npm test`
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Check(cmd, corpusBoundary); err != nil {
			b.Fatal(err)
		}
	}
}

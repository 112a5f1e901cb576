package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Bad options are refused before anything starts, naming the flag.
func TestOptionsRefused(t *testing.T) {
	ok := options{bin: "/bin/true", rounds: 1, execs: 1, reads: 1, bulkMiB: 1}
	cases := []struct {
		name string
		edit func(*options)
		want string
	}{
		{"no binary", func(o *options) { o.bin = "" }, "-bin is required"},
		{"no rounds", func(o *options) { o.rounds = 0 }, "-rounds 0: must be at least 1"},
		{"no execs", func(o *options) { o.execs = 0 }, "-execs 0: must be at least 1"},
		{"no reads", func(o *options) { o.reads = 0 }, "-reads 0: must be at least 1"},
		{"no bulk", func(o *options) { o.bulkMiB = -1 }, "-bulk-mib -1: must be at least 1"},
	}
	for _, c := range cases {
		o := ok
		c.edit(&o)
		err := run(o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %s", c.name, err, c.want)
		}
	}
}

// sshd runs with the tuning issue 34 names, on loopback, with its own
// keys, and nothing else of the system's configuration.
func TestSSHDConfigTuned(t *testing.T) {
	conf := sshdConfig("/w", 2222, "peer")
	for _, line := range []string{"ListenAddress 127.0.0.1:2222", "HostKey /w/sshd_host_ed25519",
		"AuthorizedKeysFile /w/authorized_keys", "AllowUsers peer", "UsePAM no", "UseDNS no",
		"PrintMotd no", "PrintLastLog no", "PermitUserRC no", "Subsystem sftp internal-sftp",
		"PasswordAuthentication no"} {
		if !strings.Contains(conf, line+"\n") {
			t.Errorf("sshd_config lacks %q:\n%s", line, conf)
		}
	}
	if strings.Contains(conf, "Include") {
		t.Errorf("sshd_config includes another file:\n%s", conf)
	}
}

// treeCPU counts a child's CPU once it is reaped (sshd's per-connection
// processes end that way), and the tick it reads is this process's own.
func TestTreeCPUCountsReapedChildren(t *testing.T) {
	before := treeCPU(os.Getpid())
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	child := float64(cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime()) / 1e6 // ms
	got := treeCPU(os.Getpid()) - before
	// Ticks are 10 ms; the child's rusage is finer.
	if child < 20 || got < child-20 {
		t.Errorf("the child used %.0f ms of CPU, treeCPU grew by %.0f ms", child, got)
	}
}

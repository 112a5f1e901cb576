//go:build linux

package sandbox

import (
	"bytes"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRunCollectsBothWays runs commands whose output Run collects in its
// poll loop (collect), and again with pidfd_open failing, where the read
// ends go to pumps and finish as Start's do: the results must be what each
// command prints, both ways, whatever the order and size of its writes.
func TestRunCollectsBothWays(t *testing.T) {
	big := strings.Repeat("x", 300<<10) // over a pipe's 64 KiB: read while it runs
	cases := []struct {
		name    string
		req     Request
		stdin   string
		stdout  string
		stderr  string
		code    int
		timeout bool
	}{
		{name: "both streams", req: Request{Command: "echo out; echo err >&2; exit 3"}, stdout: "out\n", stderr: "err\n", code: 3},
		{name: "merged", req: Request{Command: "echo a; echo b >&2; echo c", MergeStderr: true}, stdout: "a\nb\nc\n"},
		{name: "nothing", req: Request{Command: "true"}},
		{name: "more than a pipe holds", req: Request{Command: "head -c 307200 /dev/zero | tr '\\0' x; echo done >&2"}, stdout: big, stderr: "done\n"},
		{name: "stdout closed early", req: Request{Command: "echo first; exec 1>&-; sleep 0.05; echo later >&2"}, stdout: "first\n", stderr: "later\n"},
		{name: "background job killed at the end", req: Request{Command: "sleep 30 & echo started"}, stdout: "started\n"},
		{name: "stdin", req: Request{Command: "cat"}, stdin: "fed\n", stdout: "fed\n"},
		{name: "timeout", req: Request{Command: "echo before; exec sleep 30", Timeout: 200 * time.Millisecond}, stdout: "before\n", code: 137, timeout: true},
	}
	for _, way := range []string{"poll", "pumps"} {
		t.Run(way, func(t *testing.T) {
			if way == "pumps" {
				old := pidfdOpen
				pidfdOpen = func(int, int) (int, error) { return -1, unix.ENOSYS }
				t.Cleanup(func() { pidfdOpen = old })
			}
			e, _ := newExec(t, ModeSoftware, func(c *Config) { c.OutputLimit = 1 << 20 })
			for _, c := range cases {
				if c.stdin != "" {
					c.req.Stdin = strings.NewReader(c.stdin)
				}
				res := run(t, e, c.req)
				if string(res.Stdout) != c.stdout || string(res.Stderr) != c.stderr || res.ExitCode != c.code || res.TimedOut != c.timeout {
					t.Errorf("%s: stdout %d bytes %.40q, stderr %q, exit %d, timed out %v; want %d bytes %.40q, %q, %d, %v",
						c.name, len(res.Stdout), res.Stdout, res.Stderr, res.ExitCode, res.TimedOut, len(c.stdout), c.stdout, c.stderr, c.code, c.timeout)
				}
			}
		})
	}
}

// TestCollectCutsAHeldPipe: when the command has exited and a process
// that outlived its kill still holds its stdout open (here the test holds
// the write end), collect takes what is buffered and returns once the
// pipe has been quiet for ioGrace, instead of waiting for its end.
func TestCollectCutsAHeldPipe(t *testing.T) {
	ours, theirs, err := rawPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Close() // held open until collect has returned
	if _, err := theirs.WriteString("left behind\n"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &launched{c: &child{cmd: cmd}, stopCtx: func() bool { return true }}
	var out bytes.Buffer
	if err := r.collect([]int{ours}, []io.Writer{&out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "left behind\n" {
		t.Fatalf("collected %q", out.String())
	}
	if !r.exited.Load() {
		t.Fatal("collect returned without seeing the exit")
	}
}

// TestNoStdinIsDevNull: a command given no input reads /dev/null (the one
// the executor holds open), with Run and with Start, and ends at its EOF.
func TestNoStdinIsDevNull(t *testing.T) {
	e, _ := newExec(t, ModeSoftware)
	const cmd = "readlink /proc/self/fd/0; cat; echo end"
	for i := range 3 {
		res := run(t, e, Request{Command: cmd})
		if string(res.Stdout) != "/dev/null\nend\n" || res.ExitCode != 0 {
			t.Fatalf("Run %d: %q exit %d %q", i, res.Stdout, res.ExitCode, res.Stderr)
		}
	}
	var out bytes.Buffer
	p, err := e.Start(t.Context(), Request{Command: cmd}, Stdio{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := p.Wait(); err != nil || st.Code != 0 || out.String() != "/dev/null\nend\n" {
		t.Fatalf("Start: %q %+v %v", out.String(), st, err)
	}
}

// TestStartCollectsBothWays: Start's streams, copied by one collecting
// goroutine, and by pumps where pidfd_open fails: what the command wrote
// to each, in full (more than a pipe holds, to a writer that takes it
// slowly), and its exit status.
func TestStartCollectsBothWays(t *testing.T) {
	for _, way := range []string{"poll", "pumps"} {
		t.Run(way, func(t *testing.T) {
			if way == "pumps" {
				old := pidfdOpen
				pidfdOpen = func(int, int) (int, error) { return -1, unix.ENOSYS }
				t.Cleanup(func() { pidfdOpen = old })
			}
			e, _ := newExec(t, ModeSoftware)
			var out, errb bytes.Buffer
			slow := writerFunc(func(b []byte) (int, error) { time.Sleep(time.Millisecond); return out.Write(b) })
			p, err := e.Start(t.Context(), Request{Command: "head -c 200000 /dev/zero | tr '\\0' x; echo err >&2; exit 3"}, Stdio{Stdout: slow, Stderr: &errb})
			if err != nil {
				t.Fatal(err)
			}
			st, err := p.Wait()
			if err != nil || st.Code != 3 || out.String() != strings.Repeat("x", 200000) || errb.String() != "err\n" {
				t.Fatalf("status %+v %v, stdout %d bytes, stderr %q", st, err, out.Len(), errb.String())
			}
			if err := p.Signal("TERM"); err == nil {
				t.Fatal("Signal after Wait sent a signal to a pid that may be another process's")
			}
		})
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

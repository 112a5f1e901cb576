package sshws

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
	"github.com/agentbe/agentbe-daemon/ssh/sshd"
	"github.com/agentbe/agentbe-daemon/ssh/wsclient"
)

// Benchmarks of the hot paths, over real loopback WebSockets:
//
//	go test -run '^$' -bench . -benchtime 2s ./ssh/sshws/
//
// They are measurements, not tests: nothing asserts a time.

func BenchmarkHandshake(b *testing.B) {
	e := newEnv(b)
	b.ResetTimer()
	for b.Loop() {
		c, err := e.tryDial("")
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}

func BenchmarkExecTrue(b *testing.B) {
	e := newEnv(b)
	c := e.dial(b, "")
	b.ResetTimer()
	for b.Loop() {
		s, err := c.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Run("true"); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkExecProtocol is BenchmarkExecTrue with a process that has ended
// by the time it is started: what an exec costs on the wire and in this
// package, without the child.
func BenchmarkExecProtocol(b *testing.B) {
	e := newEnv(b, withConfig(func(c *sshd.Config) { c.Executor = doneExecutor{} }), withMode(""))
	c := e.dial(b, "")
	b.ResetTimer()
	for b.Loop() {
		s, err := c.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Run("true"); err == nil || err.(*gossh.ExitError).ExitStatus() != 3 {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkRoundTrip is one global request and its reply: the protocol's
// own round trip, with no file system or process behind it (what every
// small SFTP operation pays on top of its system calls).
func BenchmarkRoundTrip(b *testing.B) {
	e := newEnv(b)
	c := e.dial(b, "")
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSFTPStat is one SFTP STAT round trip on an existing file.
func BenchmarkSFTPStat(b *testing.B) {
	e := newEnv(b)
	c := e.sftp(b)
	if err := os.WriteFile(filepath.Join(e.root, "f"), []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Stat("/f"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSFTPSmallFile is one 4 KiB create+write+close then
// open+read+close, what the clients' write() and read() cost on the wire.
func BenchmarkSFTPSmallFile(b *testing.B) {
	e := newEnv(b)
	c := e.sftp(b)
	data := bytes.Repeat([]byte("x"), 4096)
	buf := make([]byte, 8192)
	b.SetBytes(4096)
	b.ResetTimer()
	for b.Loop() {
		f, err := c.Create("small.txt")
		if err != nil {
			b.Fatal(err)
		}
		f.Write(data)
		f.Close()
		g, err := c.Open("small.txt")
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.ReadFull(g, buf[:4096])
		g.Close()
		if n != 4096 {
			b.Fatalf("read %d", n)
		}
	}
}

func bulkClient(b *testing.B, e *env) *sftp.Client {
	c, err := sftp.NewClient(e.dial(b, ""), sftp.UseConcurrentReads(true), sftp.UseConcurrentWrites(true),
		sftp.MaxConcurrentRequestsPerFile(64))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

const bulkSize = 64 << 20

func BenchmarkSFTPUpload64MiB(b *testing.B) {
	e := newEnv(b)
	c := bulkClient(b, e)
	data := bytes.Repeat([]byte("0123456789abcdef"), bulkSize/16)
	b.SetBytes(bulkSize)
	b.ResetTimer()
	for b.Loop() {
		f, err := c.Create("up.bin")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.ReadFrom(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSFTPDownload64MiB(b *testing.B) {
	e := newEnv(b)
	c := bulkClient(b, e)
	if err := os.WriteFile(filepath.Join(e.root, "down.bin"), bytes.Repeat([]byte("z"), bulkSize), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(bulkSize)
	b.ResetTimer()
	for b.Loop() {
		f, err := c.Open("down.bin")
		if err != nil {
			b.Fatal(err)
		}
		n, err := f.WriteTo(io.Discard)
		f.Close()
		if err != nil || n != bulkSize {
			b.Fatalf("%d %v", n, err)
		}
	}
}

// BenchmarkIdleConnRSS measures the server's resident memory per idle
// connection: the server runs in a child process (this test binary,
// re-executed) so the clients' memory is not counted. "ssh" is a logged-in
// connection; "ssh+sftp" also has the SFTP session the agent-backend clients
// keep open. Reported as KiB/conn, measured once whatever b.N is (a second
// round would start from the first round's freed but still resident heap).
func BenchmarkIdleConnRSS(b *testing.B) {
	for _, withSFTP := range []bool{false, true} {
		name := "ssh"
		if withSFTP {
			name = "ssh+sftp"
		}
		b.Run(name, func(b *testing.B) {
			kib := idleConnRSS(b, 200, withSFTP)
			for b.Loop() {
			}
			b.ReportMetric(kib, "KiB/conn")
		})
	}
}

func idleConnRSS(b *testing.B, conns int, withSFTP bool) float64 {
	root := b.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SSHWS_BENCH_SERVE="+root)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	url := strings.TrimSpace(line)
	var clients []*gossh.Client
	open := func() {
		conn, err := wsclient.Dial(context.Background(), url, "")
		if err != nil {
			b.Fatal(err)
		}
		c, err := sshClient(conn)
		if err != nil {
			b.Fatal(err)
		}
		clients = append(clients, c)
		if withSFTP {
			s, err := sftp.NewClient(c)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Stat("/"); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Stop the server (it profiles itself first, if asked) before the
	// clients go away.
	defer func() {
		stdin.Close()
		cmd.Wait()
		for _, c := range clients {
			c.Close()
		}
	}()
	// Warm up: the first connections' one-time costs (code pages, pools).
	for range 5 {
		open()
	}
	time.Sleep(200 * time.Millisecond)
	base := rssKiB(b, cmd.Process.Pid)
	for range conns {
		open()
	}
	time.Sleep(500 * time.Millisecond)
	return float64(rssKiB(b, cmd.Process.Pid)-base) / float64(conns)
}

func rssKiB(b *testing.B, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// benchServe is the child side of BenchmarkIdleConnRSS: serve /ssh on a
// loopback port, print the URL, exit when stdin closes.
func benchServe(root string) {
	if os.Getenv("SSHWS_BENCH_PROFILE") != "" {
		runtime.MemProfileRate = 1 // every allocation, for an exact heap profile
	}
	root, _ = filepath.EvalSymlinks(root)
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		panic(err)
	}
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: root})
	if err != nil {
		panic(err)
	}
	key, err := sshd.LoadOrCreateHostKey(filepath.Join(root, ".host_key"))
	if err != nil {
		panic(err)
	}
	conf, err := sshd.NewConfig(sshd.Config{Workspace: ws, Executor: ex, HostKey: key})
	if err != nil {
		panic(err)
	}
	srv, err := New(Options{SSH: conf})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ssh", srv)
	hs := &http.Server{Handler: mux}
	go hs.Serve(ln)
	fmt.Printf("ws://%s/ssh\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	// SSHWS_BENCH_PROFILE=dir keeps the server's heap and goroutine
	// profiles, taken with the connections still open, for pprof.
	if dir := os.Getenv("SSHWS_BENCH_PROFILE"); dir != "" {
		// A heap profile is as of the last collection, which may have
		// run when half the connections were open: collect now, so it
		// shows what the open connections hold.
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(os.Stderr, "server: %d goroutines, heap in use %d KiB, stacks %d KiB, heap idle not released %d KiB, sys %d KiB\n",
			runtime.NumGoroutine(), ms.HeapInuse>>10, ms.StackInuse>>10, (ms.HeapIdle-ms.HeapReleased)>>10, ms.Sys>>10)
		for _, name := range []string{"heap", "goroutine"} {
			if f, err := os.Create(filepath.Join(dir, name+".pprof")); err == nil {
				pprof.Lookup(name).WriteTo(f, 0)
				f.Close()
			}
		}
	}
	hs.Close()
	srv.Close()
	ex.Close()
}

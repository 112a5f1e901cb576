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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// Benchmarks of the hot paths, over real loopback WebSockets:
//
//	go test -run '^$' -bench . -benchtime 2s ./sshws/
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
// connection (WebSocket + SSH + an open SFTP session, as the clients keep
// one): the server runs in a child process (this test binary, re-executed)
// so the clients' memory is not counted. Reported as KiB/conn.
func BenchmarkIdleConnRSS(b *testing.B) {
	const conns = 200
	root := b.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SSHWS_BENCH_SERVE="+root)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	url := strings.TrimSpace(line)
	open := func() (*gossh.Client, *sftp.Client) {
		conn, err := Dial(context.Background(), url, "")
		if err != nil {
			b.Fatal(err)
		}
		c, err := sshClient(conn)
		if err != nil {
			b.Fatal(err)
		}
		s, err := sftp.NewClient(c)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Stat("/"); err != nil {
			b.Fatal(err)
		}
		return c, s
	}
	for b.Loop() {
		c, s := open() // warm up: the first connection's one-time costs
		s.Close()
		c.Close()
		time.Sleep(200 * time.Millisecond)
		base := rssKiB(b, cmd.Process.Pid)
		var clients []*gossh.Client
		for range conns {
			c, s := open()
			_ = s
			clients = append(clients, c)
		}
		time.Sleep(500 * time.Millisecond)
		after := rssKiB(b, cmd.Process.Pid)
		b.ReportMetric(float64(after-base)/conns, "KiB/conn")
		for _, c := range clients {
			c.Close()
		}
	}
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
	root, _ = filepath.EvalSymlinks(root)
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		panic(err)
	}
	ex, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: root})
	if err != nil {
		panic(err)
	}
	srv, err := New(Options{Workspace: ws, Executor: ex, HostKeyPath: filepath.Join(root, ".host_key")})
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
	hs.Close()
	srv.Close()
	ex.Close()
}

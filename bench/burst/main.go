// Command burst measures whether the daemon gives memory back after a burst
// of connections: it starts the binary on a scratch workspace, opens N
// WS+SSH connections (each with an SFTP session and a command run, so the
// buffers of both are touched), closes them all, and prints the resident
// memory before, at the peak, and 5, 30 and 60 s after: VmRSS, and its
// anonymous part (RssAnon: the heap and stacks; the rest is the binary's
// own pages, which the code paths of the burst paged in).
//
//	go build -o /tmp/agent-backend ./cmd/agent-backend
//	go run ./bench/burst -bin /tmp/agent-backend -n 1000
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/bench/internal/procstat"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/bench/client"
)

func main() {
	bin := flag.String("bin", "agent-backend", "the agent-backend binary")
	n := flag.Int("n", 1000, "connections in the burst")
	flag.Parse()
	if err := run(*bin, *n); err != nil {
		fmt.Fprintln(os.Stderr, "burst:", err)
		os.Exit(1)
	}
}

func run(bin string, n int) error {
	dir, err := os.MkdirTemp("", "burst")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "daemon", "--root", filepath.Join(dir, "ws"), "--port", strconv.Itoa(port),
		"--ssh-host-key", filepath.Join(dir, "key"), "--isolation", "software", "--max-connections", strconv.Itoa(n+100),
		"--max-connections-per-ip", strconv.Itoa(n+100), "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	for i := 0; ; i++ {
		if resp, err := http.Get(base + "/health"); err == nil {
			resp.Body.Close()
			break
		}
		if i > 500 {
			return fmt.Errorf("the daemon did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rss := func() string {
		return fmt.Sprintf("VmRSS %6d KiB  RssAnon %6d KiB  %s", status(cmd.Process.Pid, "VmRSS"), status(cmd.Process.Pid, "RssAnon"), runtimeStats(base))
	}
	time.Sleep(time.Second)
	fmt.Printf("baseline      %s\n", rss())
	conns := make([]*gossh.Client, 0, n)
	for range n {
		c, err := client.DialSSH(context.Background(), base)
		if err != nil {
			return fmt.Errorf("after %d connections: %w", len(conns), err)
		}
		if sc, err := sftp.NewClient(c); err == nil {
			sc.ReadDir(".")
			sc.Close()
		}
		if s, err := c.NewSession(); err == nil {
			s.Run("true")
			s.Close()
		}
		conns = append(conns, c)
	}
	fmt.Printf("%d open     %s\n", n, rss())
	for _, c := range conns {
		c.Close()
	}
	start := time.Now()
	for _, at := range []time.Duration{5 * time.Second, 30 * time.Second, 60 * time.Second} {
		time.Sleep(time.Until(start.Add(at)))
		fmt.Printf("closed +%-4s  %s\n", at, rss())
	}
	return nil
}

// status reads one kB figure of /proc/PID/status, -1 where it cannot.
func status(pid int, key string) int64 {
	kb, err := procstat.StatusKiB(pid, key)
	if err != nil {
		return -1
	}
	return kb
}

// runtimeStats is the daemon's goroutines and heap in use, from /metrics.
func runtimeStats(base string) string {
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var g, h string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			g = v
		}
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				h = strconv.Itoa(int(f / 1024))
			}
		}
	}
	return fmt.Sprintf("goroutines %s  heap in use %s KiB", g, h)
}

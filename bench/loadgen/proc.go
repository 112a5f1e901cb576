package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemon is one daemon process started fresh for a round.
type daemon struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:port
	done chan struct{}
	err  error
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// start spawns argv (with {root} and {port} replaced, and {sshport} by a
// second free port, for --ssh-listen) in its own process group, stderr and
// stdout to logPath, and returns once /health answers 200, with the time
// that took from just before fork.
func start(argv []string, root string, logPath string) (*daemon, time.Duration, error) {
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	args := make([]string, len(argv))
	for i, a := range argv {
		a = strings.ReplaceAll(a, "{root}", root)
		if strings.Contains(a, "{sshport}") {
			p, err := freePort()
			if err != nil {
				return nil, 0, err
			}
			a = strings.ReplaceAll(a, "{sshport}", strconv.Itoa(p))
		}
		args[i] = strings.ReplaceAll(a, "{port}", strconv.Itoa(port))
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, 0, err
	}
	defer logf.Close()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	d := &daemon{cmd: cmd, base: fmt.Sprintf("http://127.0.0.1:%d", port), done: make(chan struct{})}

	// A client that never reuses a connection: a poll is a fresh connect,
	// refused at once until the daemon listens.
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	deadline := t0.Add(60 * time.Second)
	for {
		resp, err := hc.Get(d.base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, time.Since(t0), nil
			}
		}
		select {
		case <-d.done:
			return nil, 0, fmt.Errorf("%s exited before it was healthy (%v); see %s", args[0], d.err, logPath)
		default:
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, 0, fmt.Errorf("%s not healthy after 60s; see %s", args[0], logPath)
		}
		time.Sleep(time.Millisecond)
	}
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// stop sends SIGTERM to the process group, then SIGKILL after 5 s.
func (d *daemon) stop() {
	pgid := d.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-d.done
	}
	// Whatever the daemon left in its group (children of exec) goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// procStatus reads VmRSS and VmHWM of pid in KiB.
func procStatus(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, err
		}
		if k == "VmRSS" {
			rss = n
		} else {
			hwm = n
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS in /proc/" + strconv.Itoa(pid) + "/status")
	}
	return rss, hwm, sc.Err()
}

// rssSampler records the highest VmRSS seen every 10 ms until stopped.
type rssSampler struct {
	cancel context.CancelFunc
	done   chan int64
}

func sampleRSS(pid int) *rssSampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &rssSampler{cancel: cancel, done: make(chan int64, 1)}
	go func() {
		var peak int64
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if rss, _, err := procStatus(pid); err == nil && rss > peak {
				peak = rss
			}
			select {
			case <-ctx.Done():
				s.done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) stop() int64 { s.cancel(); return <-s.done }

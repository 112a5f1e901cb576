package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentbe/agentbe-daemon/bench/floor"
)

// cmdEchoServe is `loadgen echo-serve FILE`: the echo floor (floor.EchoHandler
// reading FILE) as a process of its own, on a free loopback port it prints
// as its first line; it serves until its stdin closes. runFloors starts it,
// so that the floor pays the same cross-process round trip as a daemon
// (wake-ups on both sides) instead of answering inside the load generator.
func cmdEchoServe(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("echo-serve: one argument, the file to serve")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: floor.EchoHandler(args[0])}
	go srv.Serve(ln)
	fmt.Println(ln.Addr().String())
	io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

// echoProcess starts `loadgen echo-serve file` with the GOMAXPROCS the
// daemon's --max-procs auto gives it (half the CPUs, at least 1), and
// returns its address and a function that stops it.
func echoProcess(file string) (addr string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(self, "echo-serve", file)
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(max(1, runtime.GOMAXPROCS(0)/2)))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop = func() { in.Close(); cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("echo-serve: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}

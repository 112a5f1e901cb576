package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/agentbe/agentbe-daemon/bench/client"
	"github.com/agentbe/agentbe-daemon/bench/floor"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// The floors: what the same work costs with no daemon logic at all, measured
// on the same machine in the same run.
//
//	echo_p50_ms          a plain net/http handler that decodes the JSON-RPC
//	                     request, reads the 4 KiB file and encodes a
//	                     tools/call result, driven by the same client as
//	                     the daemons (in this process, over loopback)
//	echo_proc_p50_ms     the same handler as a process of its own
//	                     (loadgen echo-serve, with the GOMAXPROCS the
//	                     daemon's --max-procs auto takes), as the daemons
//	                     run: the fair floor of an MCP call
//	fork_true_p50_ms     os/exec of /bin/true
//	fork_shell_p50_ms    os/exec of `bash -c true` (every exec runs a shell)
//	bwrap_true_p50_ms    bwrap with the executor's argv (sandbox.BwrapArgv:
//	                     namespaces, mounts, environment, the workspace
//	                     bound from fd 3), then true
//	bwrap_shell_p50_ms   the same, then `bash -c true`
//	executor_<mode>_p50_ms   sandbox.Executor.Run("true") in that mode
//	fs_create4k_p50_ms   os.OpenFile(O_CREATE|O_TRUNC) + 4 KiB WriteAt + Close
//	                     of a new file: the file system's part of an SFTP create
//	fs_read4k_p50_ms     os.Open + 4 KiB ReadAt + Close
func runFloors(sz sizes) (map[string]float64, []string, error) {
	m := map[string]float64{}
	var notes []string
	root, err := os.MkdirTemp("", "agentbe-bench-floor-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(root)
	root, _ = filepath.EvalSymlinks(root)
	content, err := fixtures(root)
	if err != nil {
		return nil, nil, err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	srv := &http.Server{Handler: floor.EchoHandler(filepath.Join(root, readFile))}
	go srv.Serve(ln)
	defer srv.Close()
	mc := client.NewMCP("http://"+ln.Addr().String(), 4)
	read := client.Prepare("read_text_file", map[string]any{"path": readFile})
	l, _, err := timeFor(sz.seqDur, func() error {
		r, err := mc.MustOK(read)
		if err == nil && r.Text != content {
			err = fmt.Errorf("echo: wrong text")
		}
		return err
	})
	mc.Close()
	if err != nil {
		return nil, nil, err
	}
	m["echo_p50_ms"] = l.pct(50)

	addr, stop, err := echoProcess(filepath.Join(root, readFile))
	if err != nil {
		return nil, nil, err
	}
	mc = client.NewMCP("http://"+addr, 4)
	l, _, err = timeFor(sz.seqDur, func() error {
		r, err := mc.MustOK(read)
		if err == nil && r.Text != content {
			err = fmt.Errorf("echo process: wrong text")
		}
		return err
	})
	mc.Close()
	stop()
	if err != nil {
		return nil, nil, err
	}
	m["echo_proc_p50_ms"] = l.pct(50)

	// The file system's own cost of the SFTP small ops: the same flags and
	// sizes, from this process, in a directory of the same file system.
	small := make([]byte, 4096)
	dir := filepath.Join(root, "sftp")
	settleDisk()
	i := 0
	if l, err = timeN(min(sz.warmup, 10), sz.sftpSmall, func() error {
		i++
		f, err := os.OpenFile(fmt.Sprintf("%s/small-%d", dir, i), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.WriteAt(small, 0); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}); err != nil {
		return nil, nil, err
	}
	m["fs_create4k_p50_ms"] = l.pct(50)
	j := 0
	if l, err = timeN(min(sz.warmup, 10), sz.sftpSmall, func() error {
		j = j%i + 1
		f, err := os.Open(fmt.Sprintf("%s/small-%d", dir, j))
		if err != nil {
			return err
		}
		if _, err := f.ReadAt(small, 0); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}); err != nil {
		return nil, nil, err
	}
	m["fs_read4k_p50_ms"] = l.pct(50)

	n := sz.exec
	shell := floor.Shell()
	run := func(argv ...string) func() error {
		return func() error { return exec.Command(argv[0], argv[1:]...).Run() }
	}
	if l, err = timeN(5, n, run("/bin/true")); err != nil {
		return nil, nil, err
	}
	m["fork_true_p50_ms"] = l.pct(50)
	if l, err = timeN(5, n, run(shell, "-c", "true")); err != nil {
		return nil, nil, err
	}
	m["fork_shell_p50_ms"] = l.pct(50)

	bwTrue, err := floor.Bwrap(root, "/bin/true")
	if err != nil {
		notes = append(notes, fmt.Sprintf("%v: no bwrap floors", err))
	} else {
		defer bwTrue.Close()
		if err := bwTrue.Cmd().Run(); err != nil {
			notes = append(notes, fmt.Sprintf("bwrap does not work here (%v): no bwrap floors", err))
		} else {
			if l, err = timeN(5, n, func() error { return bwTrue.Cmd().Run() }); err != nil {
				return nil, nil, err
			}
			m["bwrap_true_p50_ms"] = l.pct(50)
			bwShell, err := floor.Bwrap(root, shell, "-c", "true")
			if err != nil {
				return nil, nil, err
			}
			defer bwShell.Close()
			if l, err = timeN(5, n, func() error { return bwShell.Cmd().Run() }); err != nil {
				return nil, nil, err
			}
			m["bwrap_shell_p50_ms"] = l.pct(50)
		}
	}

	for _, mode := range []sandbox.Mode{sandbox.ModeSoftware, sandbox.ModeBwrap, sandbox.ModeNone} {
		ex, err := sandbox.New(sandbox.Config{Mode: mode, WorkspaceRoot: root})
		if err != nil {
			notes = append(notes, fmt.Sprintf("executor %s: %v", mode, err))
			continue
		}
		l, err = timeN(5, n, func() error {
			r, err := ex.Run(context.Background(), sandbox.Request{Command: "true"})
			if err == nil && r.ExitCode != 0 {
				err = fmt.Errorf("exit %d: %s", r.ExitCode, r.Stderr)
			}
			return err
		})
		ex.Close()
		if err != nil {
			notes = append(notes, fmt.Sprintf("executor %s: %v", mode, err))
			continue
		}
		m["executor_"+string(mode)+"_p50_ms"] = l.pct(50)
	}
	return m, notes, nil
}

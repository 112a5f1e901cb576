package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/bench/internal/procstat"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/agentbe/agentbe-daemon/bench/client"
)

// sizes are the counts and durations of one round.
type sizes struct {
	warmup    int           // untimed calls before each latency series
	seqDur    time.Duration // sequential MCP reads
	concDur   time.Duration // 8-concurrent MCP reads
	list      int           // list_directory calls
	exec      int           // MCP exec calls
	handshake int           // WS+SSH handshakes
	sshExec   int           // SSH exec calls
	sftpSmall int           // 4 KiB writes, and as many reads
	bulkMiB   int           // bulk transfer size
	bulkReps  int           // bulk transfers each way
	idle      int           // idle connections for the RSS figure
	pairs     int           // alternated pairs of the features round (routed/direct, preview/direct)
}

var (
	fullSizes  = sizes{50, 4 * time.Second, 4 * time.Second, 300, 200, 100, 200, 300, 64, 3, 200, 1000}
	smokeSizes = sizes{2, 200 * time.Millisecond, 200 * time.Millisecond, 5, 5, 3, 5, 5, 1, 1, 5, 5}
)

// roundResult is what one round writes: one daemon, fresh, every metric.
type roundResult struct {
	Name    string             `json:"name"`
	Round   int                `json:"round"`
	Metrics map[string]float64 `json:"metrics"`
	Notes   []string           `json:"notes,omitempty"`
}

const readFile = "f4k.txt"

// fixtures lays out the workspace before the daemon starts: the 4 KiB text
// file (64 lines of 63 characters + newline), a directory of 100 files, and
// a directory for SFTP.
func fixtures(root string) (content string, err error) {
	var b bytes.Buffer
	for i := 0; b.Len() < 4096; i++ {
		fmt.Fprintf(&b, "%04d %s\n", i, bytes.Repeat([]byte{'a' + byte(i%26)}, 58))
	}
	content = b.String()[:4096]
	if err := os.WriteFile(filepath.Join(root, readFile), []byte(content), 0o644); err != nil {
		return "", err
	}
	d := filepath.Join(root, "d100")
	if err := os.Mkdir(d, 0o755); err != nil {
		return "", err
	}
	for i := range 100 {
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("file-%03d.txt", i)), []byte("x\n"), 0o644); err != nil {
			return "", err
		}
	}
	return content, os.Mkdir(filepath.Join(root, "sftp"), 0o755)
}

// timeN runs f n times after warm untimed calls and returns the latencies.
func timeN(warm, n int, f func() error) (latencies, error) {
	for range warm {
		if err := f(); err != nil {
			return nil, err
		}
	}
	l := make(latencies, 0, n)
	for range n {
		t := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		l = append(l, time.Since(t))
	}
	return l, nil
}

// timeFor runs f sequentially for d and returns the latencies.
func timeFor(d time.Duration, f func() error) (latencies, time.Duration, error) {
	var l latencies
	t0 := time.Now()
	for time.Since(t0) < d {
		t := time.Now()
		if err := f(); err != nil {
			return nil, 0, err
		}
		l = append(l, time.Since(t))
	}
	return l, time.Since(t0), nil
}

// concurrent runs f from workers goroutines for d; it returns calls/s.
func concurrent(workers int, d time.Duration, f func() error) (float64, error) {
	var (
		n     atomic.Int64
		wg    sync.WaitGroup
		first atomic.Pointer[error]
	)
	t0 := time.Now()
	stop := t0.Add(d)
	for range workers {
		wg.Go(func() {
			for time.Now().Before(stop) && first.Load() == nil {
				if err := f(); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return 0, *e
	}
	return float64(n.Load()) / time.Since(t0).Seconds(), nil
}

// runRound starts the daemon fresh and measures everything once.
func runRound(name string, round int, argv []string, sz sizes, logDir string) (*roundResult, error) {
	res := &roundResult{Name: name, Round: round, Metrics: map[string]float64{}}
	m := res.Metrics
	root, err := os.MkdirTemp("", "agentbe-bench-"+name+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	root, _ = filepath.EvalSymlinks(root)
	content, err := fixtures(root)
	if err != nil {
		return nil, err
	}

	d, startup, err := start(argv, root, filepath.Join(logDir, fmt.Sprintf("%s-%d.log", name, round)))
	if err != nil {
		return nil, err
	}
	defer d.stop()
	m["start_healthy_ms"] = float64(startup.Microseconds()) / 1e3
	rss, _, err := procStatus(d.pid())
	if err != nil {
		return nil, err
	}
	m["rss_ready_mib"] = float64(rss) / 1024

	// Idle connections first, on a daemon that has done nothing yet: later,
	// a garbage-collected runtime may give back the garbage of the other
	// phases while the connections open, and the difference means nothing.
	if err := idlePhase(d.base, d.pid(), sz.idle, m); err != nil {
		return nil, fmt.Errorf("idle connections: %w", err)
	}
	// MCP, with the RSS sampled throughout. The peak (VmHWM) is reset first
	// so that it covers this phase only.
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", d.pid()), []byte("5"), 0); err != nil {
		res.Notes = append(res.Notes, "could not reset VmHWM ("+err.Error()+"): the peak includes the idle connections")
	}
	sampler := sampleRSS(d.pid())
	st0, cpuErr := procstat.Read(d.pid())
	calls, err := mcpPhase(d.base, content, sz, m)
	if err != nil {
		sampler.stop()
		return nil, fmt.Errorf("mcp: %w", err)
	}
	st1, err := procstat.Read(d.pid())
	if err = errors.Join(cpuErr, err); err == nil && calls > 0 {
		m["mcp_cpu_us_per_call"] = float64((st1.CPU - st0.CPU).Microseconds()) / float64(calls)
	} else {
		res.Notes = append(res.Notes, fmt.Sprintf("no CPU per MCP call: %v", err))
	}
	peak := sampler.stop()
	if _, hwm, err := procStatus(d.pid()); err == nil && hwm > peak {
		peak = hwm
	}
	m["rss_peak_mib"] = float64(peak) / 1024

	if err := sshPhase(d.base, root, sz, m); err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	return res, nil
}

// mcpPhase measures the MCP rows; calls is how many calls it made, for the
// daemon's CPU time per call.
func mcpPhase(base, content string, sz sizes, m map[string]float64) (int64, error) {
	mc := client.NewMCP(base, 16)
	defer mc.Close()
	var n atomic.Int64
	call := func(c client.Call) (client.Result, error) { n.Add(1); return mc.MustOK(c) }
	read := client.Prepare("read_text_file", map[string]any{"path": readFile})
	r, err := call(read)
	if err != nil {
		return 0, err
	}
	// Both daemons return the file as is when it fits in the default limit;
	// check it once fully, then by length.
	if r.Text != content && r.Text != content+"\n" {
		return 0, fmt.Errorf("read_text_file returned %d bytes, want the 4096-byte file: %.120q", len(r.Text), r.Text)
	}
	want := len(r.Text)
	doRead := func() error {
		r, err := call(read)
		if err == nil && len(r.Text) != want {
			err = fmt.Errorf("read_text_file: %d bytes, want %d", len(r.Text), want)
		}
		return err
	}
	if _, err := timeN(sz.warmup, 0, doRead); err != nil {
		return 0, err
	}
	l, el, err := timeFor(sz.seqDur, doRead)
	if err != nil {
		return 0, err
	}
	m["mcp_read_p50_ms"], m["mcp_read_p90_ms"], m["mcp_read_p99_ms"] = l.pct(50), l.pct(90), l.pct(99)
	m["mcp_read_seq_ops"] = float64(len(l)) / el.Seconds()
	if m["mcp_read_c8_ops"], err = concurrent(8, sz.concDur, doRead); err != nil {
		return 0, err
	}

	list := client.Prepare("list_directory", map[string]any{"path": "d100"})
	l, err = timeN(sz.warmup, sz.list, func() error {
		r, err := call(list)
		if err == nil && len(r.Text) < 100*len("[FILE] file-000.txt") {
			err = fmt.Errorf("list_directory: short listing %.120q", r.Text)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	m["mcp_list100_p50_ms"] = l.pct(50)

	exec := client.Prepare("exec", map[string]any{"command": "true"})
	l, err = timeN(min(sz.warmup, 10), sz.exec, func() error { _, err := call(exec); return err })
	if err != nil {
		return 0, err
	}
	m["mcp_exec_true_p50_ms"] = l.pct(50)
	return n.Load(), nil
}

func sshPhase(base, root string, sz sizes, m map[string]float64) error {
	ctx := context.Background()
	l, err := timeN(min(sz.warmup, 5), sz.handshake, func() error {
		c, err := client.DialSSH(ctx, base)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err != nil {
		return err
	}
	m["ssh_handshake_p50_ms"] = l.pct(50)

	c, err := client.DialSSH(ctx, base)
	if err != nil {
		return err
	}
	defer c.Close()
	// An exec that ends in EOF is counted, not timed, and the run goes on:
	// it is a server race (the channel closed before the exec request was
	// answered), reported under the table, not a reason to lose the round.
	var failed int
	l, err = timeN(min(sz.warmup, 10), sz.sshExec, func() error {
		for {
			err := client.Exec(c, "true")
			if !errors.Is(err, io.EOF) {
				return err
			}
			if failed++; failed > sz.sshExec/10+3 {
				return fmt.Errorf("ssh exec: %d calls ended in EOF", failed)
			}
		}
	})
	if err != nil {
		return err
	}
	m["ssh_exec_true_p50_ms"] = l.pct(50)
	m["ssh_exec_eof"] = float64(failed)

	sc, err := client.SFTP(c)
	if err != nil {
		return err
	}
	err = sftpPhase(sc, filepath.Join(root, "sftp"), sz, m)
	// The SSH connection goes first: the reference never answers the close
	// of the sftp channel, and sftp.Client.Close would wait for ever.
	c.Close()
	sc.Close()
	if err != nil {
		return fmt.Errorf("sftp: %w", err)
	}
	return nil
}

func sftpPhase(sc *sftp.Client, dir string, sz sizes, m map[string]float64) error {
	small := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4 KiB
	settleDisk()
	i := 0
	l, err := timeN(min(sz.warmup, 10), sz.sftpSmall, func() error {
		i++
		f, err := sc.OpenFile(fmt.Sprintf("%s/small-%d", dir, i), os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			return err
		}
		if _, err := f.Write(small); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
	if err != nil {
		return err
	}
	m["sftp_write4k_p50_ms"] = l.pct(50)
	buf := make([]byte, 8192)
	j := 0
	l, err = timeN(min(sz.warmup, 10), sz.sftpSmall, func() error {
		j = j%i + 1
		f, err := sc.Open(fmt.Sprintf("%s/small-%d", dir, j))
		if err != nil {
			return err
		}
		n, err := io.ReadFull(f, buf[:4096])
		if err == nil && n != 4096 {
			err = fmt.Errorf("sftp read: %d bytes", n)
		}
		if err != nil {
			f.Close()
			return err
		}
		return f.Close()
	})
	if err != nil {
		return err
	}
	m["sftp_read4k_p50_ms"] = l.pct(50)

	size := sz.bulkMiB << 20
	blob := make([]byte, size)
	rand.Read(blob)
	path := dir + "/bulk.bin"
	var up, down []float64
	for range sz.bulkReps {
		t := time.Now()
		f, err := sc.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
		if err != nil {
			return err
		}
		if n, err := f.ReadFrom(bytes.NewReader(blob)); err != nil || n != int64(size) {
			f.Close()
			return fmt.Errorf("upload: %d bytes, %v", n, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		up = append(up, float64(sz.bulkMiB)/time.Since(t).Seconds())

		t = time.Now()
		f, err = sc.Open(path)
		if err != nil {
			return err
		}
		var got countWriter
		if n, err := f.WriteTo(&got); err != nil || n != int64(size) {
			f.Close()
			return fmt.Errorf("download: %d bytes, %v", n, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
		down = append(down, float64(sz.bulkMiB)/time.Since(t).Seconds())
	}
	m["sftp_up_mibs"], m["sftp_down_mibs"] = median(up), median(down)
	return nil
}

type countWriter int64

func (w *countWriter) Write(p []byte) (int, error) { *w += countWriter(len(p)); return len(p), nil }

// idlePhase opens n WS+SSH connections and leaves them idle; the RSS growth
// divided by n is the cost of one.
func idlePhase(base string, pid, n int, m map[string]float64) error {
	// One connection first, so that what every connection shares (code
	// paged in, the SSH server's first allocations) is not counted.
	first, err := client.DialSSH(context.Background(), base)
	if err != nil {
		return err
	}
	defer first.Close()
	time.Sleep(500 * time.Millisecond)
	before, _, err := procStatus(pid)
	if err != nil {
		return err
	}
	anon0, anonErr := procstat.StatusKiB(pid, "RssAnon")
	conns := make([]*gossh.Client, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := client.DialSSH(context.Background(), base)
		if err != nil {
			return fmt.Errorf("after %d connections: %w", len(conns), err)
		}
		conns = append(conns, c)
	}
	time.Sleep(time.Second)
	after, _, err := procStatus(pid)
	if err != nil {
		return err
	}
	m["rss_idle_conn_kib"] = float64(after-before) / float64(n)
	// The anonymous part alone: what the connections hold, without the
	// executable's pages the phase pages in (a daemon that gives them
	// back at ready pages some in again here, the collector's code among
	// them).
	if anon1, err := procstat.StatusKiB(pid, "RssAnon"); anonErr == nil && err == nil {
		m["rss_idle_conn_anon_kib"] = float64(anon1-anon0) / float64(n)
	}
	return nil
}

// settleDisk writes back every dirty page before a phase that creates small
// files. The rounds before it uploaded 3 × 64 MiB per daemon; while the
// kernel is still writing that back, creating a 4 KiB file on ext4 waits on
// the journal and costs several times its idle time (figures in
// docs/performance.md, "Figures behind comments in the code"), a cost of the
// previous phase and the same for both daemons that would otherwise swamp
// what the daemons themselves add.
func settleDisk() { syscall.Sync() }

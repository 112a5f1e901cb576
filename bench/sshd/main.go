// Command sshd-peer measures the daemon's SSH port beside OpenSSH's sshd on
// this machine, both driven by the same clients, and prints one table with
// the ratio of every row (docs/performance.md, "Beside OpenSSH sshd").
// bench/sshd/peer.sh builds the daemon and runs it; run that.
//
// Both servers are processes of their own on 127.0.0.1, serving the same
// workspace directory: sshd (sshd -D -f CONFIG, a configuration of its own
// tuned as an operator would: no PAM, no DNS, no motd or lastlog,
// internal-sftp, a login user whose shell is /bin/sh with an empty home and
// no rc files) and our daemon's SSH port (daemon --ssh-listen). Rows:
//
//   - exec `true`: OpenSSH's ssh, a new connection per command
//     (ControlMaster off), one command at a time, alternating servers;
//   - SFTP 4 KiB read: x/crypto/ssh + pkg/sftp, one connection per server
//     and round, open + read + close of a 4 KiB file, alternating servers;
//   - SFTP 4 KiB get, 64 MiB upload and download: OpenSSH's sftp -b (64
//     requests of 32 KiB in flight), one sftp process per server and
//     round, each command timed from its line on sftp's stdin to the
//     answer of a pwd after it (sftp answers pwd itself, without a
//     request), so the login is not counted.
//
// Rounds alternate which server goes first; each figure is the median over
// rounds of the round's median (exec, reads) or time (bulk).
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/bench/internal/figures"
	"github.com/agentbe/agentbe-daemon/bench/internal/procstat"
	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
)

type options struct {
	bin, sshdBin, login, workspaces, cipher string
	rounds, execs, reads, bulkMiB           int
	keep                                    bool
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "", "our daemon's binary (agent-backend); required")
	flag.StringVar(&o.sshdBin, "sshd", "/usr/sbin/sshd", "OpenSSH's sshd")
	flag.StringVar(&o.login, "user", "agentbe-peer", "sshd's login user: made (shell /bin/sh, empty home) if missing")
	flag.StringVar(&o.workspaces, "workspaces", "/dev/shm", "where the shared workspace is made")
	flag.StringVar(&o.cipher, "cipher", "", "a cipher for every client (ssh -c, x/crypto's Ciphers); empty lets them negotiate")
	flag.IntVar(&o.rounds, "rounds", 5, "measured rounds")
	flag.IntVar(&o.execs, "execs", 30, "exec `true` per server and round")
	flag.IntVar(&o.reads, "reads", 300, "SFTP 4 KiB reads per server and round")
	flag.IntVar(&o.bulkMiB, "bulk-mib", 64, "size of the SFTP upload and download, MiB")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (configs, logs)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "sshd-peer:", err)
		os.Exit(1)
	}
}

// server is one side: where it listens and how a path of the workspace is
// named on it.
type server struct {
	name   string
	port   int
	prefix string // remote path of the workspace's root
	proc   *exec.Cmd
	cipher string // negotiated by OpenSSH's ssh
}

func run(o options) error {
	if o.bin == "" {
		return errors.New("-bin is required (bench/sshd/peer.sh builds it)")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"-rounds", o.rounds}, {"-execs", o.execs}, {"-reads", o.reads}, {"-bulk-mib", o.bulkMiB}} {
		if f.v < 1 {
			return fmt.Errorf("%s %d: must be at least 1", f.name, f.v)
		}
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: sshd -D on a port of its own, and the login user")
	}
	work, err := os.MkdirTemp("", "agentbe-sshd-peer.")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "== keeping", work)
	} else {
		defer os.RemoveAll(work)
	}
	// sshd reads the authorized keys as the login user.
	if err := os.Chmod(work, 0o755); err != nil {
		return err
	}
	uid, gid, err := loginUser(o.login, filepath.Join(work, "home"))
	if err != nil {
		return err
	}
	ws, err := os.MkdirTemp(o.workspaces, "agentbe-sshd-peer-ws.")
	if err != nil {
		return fmt.Errorf("-workspaces %s: %w", o.workspaces, err)
	}
	defer os.RemoveAll(ws)
	if err := os.Chown(ws, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(ws, 0o777); err != nil { // our daemon writes as root, sshd as the user
		return err
	}

	sh := func(name string, args ...string) error {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	clientKey := filepath.Join(work, "client_ed25519")
	if err := sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", clientKey); err != nil {
		return err
	}
	if err := sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(work, "sshd_host_ed25519")); err != nil {
		return err
	}
	pub, err := os.ReadFile(clientKey + ".pub")
	if err != nil {
		return err
	}
	authKeys := filepath.Join(work, "authorized_keys")
	if err := os.WriteFile(authKeys, pub, 0o644); err != nil {
		return err
	}
	sshdPort, ourPort, httpPort := freePort(), freePort(), freePort()
	conf := filepath.Join(work, "sshd_config")
	if err := os.WriteFile(conf, []byte(sshdConfig(work, sshdPort, o.login)), 0o644); err != nil {
		return err
	}

	peer := &server{name: "sshd", port: sshdPort, prefix: ws}
	ours := &server{name: "ours", port: ourPort, prefix: ""}
	peer.proc = exec.Command(o.sshdBin, "-D", "-e", "-f", conf)
	ours.proc = exec.Command(o.bin, "daemon", "--root", ws, "--bind", "127.0.0.1",
		"--port", strconv.Itoa(httpPort), "--isolation", "software",
		"--state-dir", filepath.Join(work, "state"), "--ssh-host-key", filepath.Join(work, "ours_ed25519"),
		"--ssh-listen", "127.0.0.1:"+strconv.Itoa(ourPort), "--ssh-authorized-keys", authKeys,
		"--log-level", "warn")
	for _, s := range []*server{peer, ours} {
		log, err := os.Create(filepath.Join(work, s.name+".log"))
		if err != nil {
			return err
		}
		defer log.Close()
		s.proc.Stdout, s.proc.Stderr = log, log
		s.proc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := s.proc.Start(); err != nil {
			return err
		}
		defer func() {
			_ = syscall.Kill(-s.proc.Process.Pid, syscall.SIGTERM)
			_ = s.proc.Wait()
		}()
		if err := waitPort(s.port, 10*time.Second); err != nil {
			return fmt.Errorf("%s did not listen (log %s): %w", s.name, log.Name(), err)
		}
	}

	c := &clients{o: o, work: work, key: clientKey, login: o.login}
	if c.signer, err = loadSigner(clientKey); err != nil {
		return err
	}
	// Fixtures: one 4 KiB file for the reads, the upload's source.
	small := make([]byte, 4096)
	_, _ = rand.Read(small)
	if err := os.WriteFile(filepath.Join(ws, "small-4k"), small, 0o644); err != nil {
		return err
	}
	big := make([]byte, o.bulkMiB<<20)
	_, _ = rand.Read(big)
	local := filepath.Join(o.workspaces, filepath.Base(ws)+".local")
	if err := os.WriteFile(local, big, 0o644); err != nil {
		return err
	}
	defer os.Remove(local)
	defer os.Remove(local + ".back")
	big = nil
	for _, s := range []*server{peer, ours} {
		// Warm-up, not counted: each side's first login, page cache, and
		// the download's source.
		if s.cipher, err = c.negotiated(s); err != nil {
			return err
		}
		if _, err := c.sftpBatch(s, fmt.Sprintf("put %s %s/big-%s\n", local, s.prefix, s.name)); err != nil {
			return err
		}
	}

	load0 := figures.LoadAvg()
	start := time.Now().UTC()
	t := newTable(o.bulkMiB)
	for r := range o.rounds {
		order := []*server{peer, ours}
		if r%2 == 1 {
			order = []*server{ours, peer}
		}
		fmt.Fprintf(os.Stderr, "== round %d/%d\n", r+1, o.rounds)
		// exec: one command at a time, alternating servers.
		lat := map[*server][]float64{}
		cpu := cpuMarks(order)
		for range o.execs {
			for _, s := range order {
				d, err := c.exec(s)
				if err != nil {
					return err
				}
				lat[s] = append(lat[s], figures.Ms(d))
			}
		}
		for _, s := range order {
			t.add(rowExec, s, figures.Median(lat[s]))
			t.add(rowExec+cpuRows, s, cpu[s].since()/float64(o.execs))
		}
		// 4 KiB reads through pkg/sftp: one connection per server,
		// alternating per read.
		if err := c.reads(order, "small-4k", t); err != nil {
			return err
		}
		// OpenSSH's sftp: 4 KiB gets, then the bulk put and get, each
		// server in one sftp process per round.
		for _, s := range order {
			if err := c.sftpRound(s, local, ws, t); err != nil {
				return err
			}
		}
	}
	fmt.Printf("sshd (%s) vs our SSH port (%s), %d rounds, %s–%s UTC; load average %s → %s\n",
		version(o.sshdBin), filepath.Base(o.bin), o.rounds, start.Format("2006-01-02 15:04"),
		time.Now().UTC().Format("15:04"), load0, figures.LoadAvg())
	fmt.Printf("cipher negotiated by OpenSSH's ssh/sftp: sshd %s, ours %s; by x/crypto's client (pkg/sftp reads): %s; workspace %s (%s)\n\n",
		peer.cipher, ours.cipher, c.goCipher(), ws, fsType(ws))
	t.print()
	return nil
}

// The rows, in order; each has a twin cpuRows further on: the server's CPU
// time for it.
const (
	rowExec = iota
	rowReadGo
	rowGet
	rowPut
	rowDownload
	cpuRows
)

type table struct{ rows []*row }

func newTable(mib int) *table {
	t := &table{rows: []*row{
		{name: "SSH exec `true` p50 (ssh, a connection each)", unit: "ms", target: 2},
		{name: "SFTP 4 KiB open+read+close p50 (pkg/sftp)", unit: "ms", target: 2},
		{name: "SFTP 4 KiB get p50 (sftp -b)", unit: "ms", target: 2},
		{name: fmt.Sprintf("SFTP %d MiB upload (sftp -b put)", mib), unit: "MiB/s", higher: true, target: 1.2},
		{name: fmt.Sprintf("SFTP %d MiB download (sftp -b get)", mib), unit: "MiB/s", higher: true, target: 1.2},
	}}
	for _, name := range []string{"exec `true`, per exec", "4 KiB read (pkg/sftp), per read",
		"4 KiB get (sftp -b), per get", fmt.Sprintf("%d MiB upload", mib), fmt.Sprintf("%d MiB download", mib)} {
		t.rows = append(t.rows, &row{name: name, unit: "ms"})
	}
	return t
}

func (t *table) add(i int, s *server, v float64) {
	if s.name == "sshd" {
		t.rows[i].peer = append(t.rows[i].peer, v)
	} else {
		t.rows[i].ours = append(t.rows[i].ours, v)
	}
}

func (t *table) print() {
	fmt.Println("| row | sshd | ours | ratio | target | |")
	fmt.Println("|---|---:|---:|---:|---:|---|")
	pass, fail := 0, 0
	for i, r := range t.rows {
		if i == cpuRows {
			fmt.Printf("\nServer CPU (user + system time of the server's process tree, from /proc; what the load of the machine changes least):\n\n")
			fmt.Println("| CPU of | sshd | ours | ratio |")
			fmt.Println("|---|---:|---:|---:|")
		}
		p, q := figures.Median(r.peer), figures.Median(r.ours)
		ratio := p / q
		if r.higher {
			ratio = q / p
		}
		cell := func(v []float64, m float64) string {
			return fmt.Sprintf("%s %s (%s–%s)", figures.Num(m), r.unit, figures.Num(slices.Min(v)), figures.Num(slices.Max(v)))
		}
		if i >= cpuRows {
			fmt.Printf("| %s | %s | %s | %.2f× |\n", r.name, cell(r.peer, p), cell(r.ours, q), ratio)
			continue
		}
		verdict := "fail"
		if ratio >= r.target {
			verdict = "pass"
			pass++
		} else {
			fail++
		}
		fmt.Printf("| %s | %s | %s | %.2f× | ≥ %g× | %s |\n", r.name, cell(r.peer, p), cell(r.ours, q), ratio, r.target, verdict)
	}
	fmt.Printf("\nratio > 1: ours is better (sshd ÷ ours for times, ours ÷ sshd for throughput); each figure the median over rounds, in brackets the lowest – highest round. targets: %d pass, %d fail\n", pass, fail)
}

// cpuMark is a server's CPU time at a moment.
type cpuMark struct {
	pid int
	at  float64 // ms
}

func cpuMarks(servers []*server) map[*server]*cpuMark {
	m := map[*server]*cpuMark{}
	for _, s := range servers {
		m[s] = markCPU(s)
	}
	return m
}

func markCPU(s *server) *cpuMark {
	pid := s.proc.Process.Pid
	return &cpuMark{pid: pid, at: treeCPU(pid)}
}

// since is the CPU time the server used since the mark, ms.
func (m *cpuMark) since() float64 { return treeCPU(m.pid) - m.at }

// treeCPU sums user and system time, own and of reaped children, of pid
// and every live descendant, in ms: sshd's per-connection processes are
// its descendants while they run and in its children's time once reaped,
// so each tick is counted once.
func treeCPU(root int) float64 {
	type proc struct {
		ppid int
		cpu  float64
	}
	procs := map[int]proc{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil {
			continue
		}
		procs[pid] = proc{st.PPID, float64((st.CPU + st.Children).Microseconds()) / 1000}
	}
	var sum float64
	for pid, p := range procs {
		for q := pid; q > 1; q = procs[q].ppid {
			if q == root {
				sum += p.cpu
				break
			}
			if _, ok := procs[q]; !ok {
				break
			}
		}
	}
	return sum
}

// row is one figure: per-round values of each side.
type row struct {
	name, unit string
	higher     bool // throughput: higher is better
	target     float64
	peer, ours []float64
}

// clients drives both servers identically.
type clients struct {
	o      options
	work   string
	key    string
	login  string
	signer ssh.Signer
}

func (c *clients) sshArgs(s *server) []string {
	a := []string{"-F", "/dev/null", "-i", c.key, "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no",
		"-o", "ControlMaster=no", "-o", "ControlPath=none", "-o", "BatchMode=yes",
		"-o", "LogLevel=ERROR", "-o", "User=" + c.login}
	if c.o.cipher != "" {
		a = append(a, "-c", c.o.cipher)
	}
	return a
}

var cipherLine = regexp.MustCompile(`kex: server->client cipher: (\S+)`)

// negotiated logs in once with ssh -v and returns the cipher it chose.
func (c *clients) negotiated(s *server) (string, error) {
	args := append(c.sshArgs(s), "-v", "-o", "LogLevel=DEBUG1", "-p", strconv.Itoa(s.port), "127.0.0.1", "true")
	out, err := exec.Command("ssh", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: ssh true: %v\n%s", s.name, err, out)
	}
	m := cipherLine.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%s: ssh -v names no cipher", s.name)
	}
	return string(m[1]), nil
}

func (c *clients) exec(s *server) (time.Duration, error) {
	args := append(c.sshArgs(s), "-p", strconv.Itoa(s.port), "127.0.0.1", "true")
	cmd := exec.Command("ssh", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t := time.Now()
	err := cmd.Run()
	d := time.Since(t)
	if err != nil || out.Len() > 0 {
		return 0, fmt.Errorf("%s: ssh true: %v: %q", s.name, err, out.String())
	}
	return d, nil
}

// sftpRound runs one sftp process on s: c.o.reads gets of the 4 KiB file
// (after 20 not counted), a put and a get of the bulk file, each checked.
func (c *clients) sftpRound(s *server, local, ws string, t *table) error {
	p, err := c.startSFTP(s)
	if err != nil {
		return err
	}
	defer p.close()
	var gets []float64
	for range 20 {
		if _, err := p.do(fmt.Sprintf("get %s/small-4k /dev/null", s.prefix)); err != nil {
			return err
		}
	}
	cpu := markCPU(s)
	for range c.o.reads {
		d, err := p.do(fmt.Sprintf("get %s/small-4k /dev/null", s.prefix))
		if err != nil {
			return err
		}
		gets = append(gets, figures.Ms(d))
	}
	t.add(rowGet, s, figures.Median(gets))
	t.add(rowGet+cpuRows, s, cpu.since()/float64(c.o.reads))
	cpu = markCPU(s)
	put, err := p.do(fmt.Sprintf("put %s %s/up-%s", local, s.prefix, s.name))
	if err != nil {
		return err
	}
	t.add(rowPut+cpuRows, s, cpu.since())
	cpu = markCPU(s)
	get, err := p.do(fmt.Sprintf("get %s/big-%s %s.back", s.prefix, s.name, local))
	if err != nil {
		return err
	}
	t.add(rowDownload+cpuRows, s, cpu.since())
	if err := sameFile(local, local+".back"); err != nil {
		return fmt.Errorf("%s: download: %w", s.name, err)
	}
	if err := sameFile(local, filepath.Join(ws, "up-"+s.name)); err != nil {
		return fmt.Errorf("%s: upload: %w", s.name, err)
	}
	t.add(rowPut, s, float64(c.o.bulkMiB)/put.Seconds())
	t.add(rowDownload, s, float64(c.o.bulkMiB)/get.Seconds())
	return nil
}

// sftpProc is one OpenSSH sftp -b - process fed a command at a time.
type sftpProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *bytes.Buffer
	name   string
}

func (c *clients) startSFTP(s *server) (*sftpProc, error) {
	args := append(c.sshArgs(s), "-q", "-b", "-", "-P", strconv.Itoa(s.port), "127.0.0.1")
	p := &sftpProc{cmd: exec.Command("sftp", args...), stderr: &bytes.Buffer{}, name: s.name}
	var err error
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.out = bufio.NewReader(out)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	if _, err := p.do(""); err != nil { // logged in
		p.close()
		return nil, err
	}
	return p, nil
}

// do sends one command (none if "") and a pwd, and returns the time until
// pwd's answer: sftp runs batch commands in order and stops at the first
// that fails.
func (p *sftpProc) do(command string) (time.Duration, error) {
	if command != "" {
		command += "\n"
	}
	t := time.Now()
	if _, err := io.WriteString(p.in, command+"pwd\n"); err != nil {
		return 0, fmt.Errorf("%s: sftp %q: %v: %s", p.name, command, err, p.stderr)
	}
	for {
		line, err := p.out.ReadString('\n')
		if strings.HasPrefix(line, "Remote working directory:") {
			return time.Since(t), nil
		}
		if err != nil {
			return 0, fmt.Errorf("%s: sftp %q: %v: %s", p.name, command, err, p.stderr)
		}
	}
}

func (p *sftpProc) close() {
	_ = p.in.Close()
	_ = p.cmd.Wait()
}

// sftpBatch runs one sftp -b process and returns how long it took.
func (c *clients) sftpBatch(s *server, batch string) (time.Duration, error) {
	args := append(c.sshArgs(s), "-q", "-b", "-", "-P", strconv.Itoa(s.port), "127.0.0.1")
	cmd := exec.Command("sftp", args...)
	cmd.Stdin = strings.NewReader(batch)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t := time.Now()
	err := cmd.Run()
	d := time.Since(t)
	if err != nil {
		return 0, fmt.Errorf("%s: sftp -b %q: %v\n%s", s.name, batch, err, out.String())
	}
	return d, nil
}

func (c *clients) goConfig() *ssh.ClientConfig {
	cc := &ssh.ClientConfig{
		User:            c.login,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(c.signer)},
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), // loopback, our own servers
	}
	if c.o.cipher != "" {
		cc.Ciphers = []string{c.o.cipher}
	}
	return cc
}

// goCipher names the cipher x/crypto's client picks: the first of its
// preference both servers offer (both offer aes128-gcm, its first).
func (c *clients) goCipher() string {
	if c.o.cipher != "" {
		return c.o.cipher
	}
	return ssh.SupportedAlgorithms().Ciphers[0]
}

// reads opens one pkg/sftp client per server and times open + read 4 KiB +
// close of name, alternating servers, o.reads times each after 20 not
// counted.
func (c *clients) reads(order []*server, name string, t *table) error {
	cls := map[*server]*sftp.Client{}
	for _, s := range order {
		conn, err := ssh.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.port), c.goConfig())
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		defer conn.Close()
		cl, err := sftp.NewClient(conn)
		if err != nil {
			return fmt.Errorf("%s: sftp: %w", s.name, err)
		}
		defer cl.Close()
		cls[s] = cl
	}
	buf := make([]byte, 8192)
	res := map[*server][]float64{}
	var cpu map[*server]*cpuMark
	for i := range c.o.reads + 20 {
		if i == 20 {
			cpu = cpuMarks(order)
		}
		for _, s := range order {
			t := time.Now()
			f, err := cls[s].Open(s.prefix + "/" + name)
			if err != nil {
				return fmt.Errorf("%s: open: %w", s.name, err)
			}
			n, err := io.ReadFull(f, buf[:4096])
			if err != nil || n != 4096 {
				return fmt.Errorf("%s: read %d: %w", s.name, n, err)
			}
			if err := f.Close(); err != nil {
				return fmt.Errorf("%s: close: %w", s.name, err)
			}
			if i >= 20 {
				res[s] = append(res[s], figures.Ms(time.Since(t)))
			}
		}
	}
	for _, s := range order {
		t.add(rowReadGo, s, figures.Median(res[s]))
		t.add(rowReadGo+cpuRows, s, cpu[s].since()/float64(c.o.reads))
	}
	return nil
}

// loginUser returns the uid and gid of sshd's login user, making it (shell
// /bin/sh, home an empty directory under the run's temporary directory) if
// it does not exist; an existing one's home is pointed there for the run.
func loginUser(name, home string) (int, int, error) {
	if err := os.Mkdir(home, 0o755); err != nil {
		return 0, 0, err
	}
	if _, err := user.Lookup(name); err != nil {
		// Password "*", not useradd's "!": without PAM, sshd refuses a
		// locked account even its keys.
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--home-dir", home,
			"--shell", "/bin/sh", "--password", "*", name).CombinedOutput()
		if err != nil {
			return 0, 0, fmt.Errorf("-user %s: useradd: %v: %s", name, err, out)
		}
	} else if out, err := exec.Command("usermod", "--home", home, "--shell", "/bin/sh", "--password", "*", name).CombinedOutput(); err != nil {
		return 0, 0, fmt.Errorf("-user %s: usermod: %v: %s", name, err, out)
	}
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid, os.Chown(home, uid, gid)
}

// sshdConfig is sshd tuned as an operator would for this: nothing per login
// but the login (no PAM, DNS, motd, lastlog, rc files), SFTP in process.
func sshdConfig(work string, port int, login string) string {
	return fmt.Sprintf(`ListenAddress 127.0.0.1:%d
HostKey %s/sshd_host_ed25519
PidFile none
AuthorizedKeysFile %s/authorized_keys
AllowUsers %s
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
PrintMotd no
PrintLastLog no
PermitUserRC no
PermitUserEnvironment no
X11Forwarding no
StrictModes no
MaxStartups 100:30:200
Subsystem sftp internal-sftp
LogLevel ERROR
`, port, work, work, login)
}

func loadSigner(path string) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		return nil, err
	}
	if ek, ok := k.(*ed25519.PrivateKey); ok {
		return ssh.NewSignerFromKey(*ek)
	}
	return ssh.NewSignerFromKey(k)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitPort(port int, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func sameFile(a, b string) error {
	x, err := os.ReadFile(a)
	if err != nil {
		return err
	}
	y, err := os.ReadFile(b)
	if err != nil {
		return err
	}
	if !bytes.Equal(x, y) {
		return fmt.Errorf("%s (%d bytes) differs from %s (%d bytes)", b, len(y), a, len(x))
	}
	return nil
}

func version(sshd string) string {
	out, _ := exec.Command(sshd, "-V").CombinedOutput()
	return strings.TrimSpace(strings.SplitN(string(out), ",", 2)[0])
}

func fsType(dir string) string {
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) != nil {
		return "?"
	}
	switch st.Type {
	case 0x01021994:
		return "tmpfs"
	case 0xef53:
		return "ext4"
	}
	return fmt.Sprintf("fs 0x%x", st.Type)
}

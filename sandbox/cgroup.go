//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// Each command runs in a cgroup of its own, created before it starts and
// entered as it is created, so that no process of it, however it forks,
// setsids and exits, is ever outside: the kill at its end takes everything
// in the cgroup, and the cgroup's pids controller bounds how many processes
// (threads) it has at once. One kind of cgroup is used per executor, the
// first that works, tried at New:
//
//   - cgroupV2Pids: a cgroup v2 below the daemon's own, with the pids
//     controller enabled for it. The child is cloned into it
//     (CLONE_INTO_CGROUP, SysProcAttr.UseCgroupFD); the kill writes
//     cgroup.kill, which the kernel carries out atomically, forks in flight
//     included; pids.max bounds the processes.
//   - cgroupV1Pids: a cgroup of the v1 pids hierarchy (hybrid systems,
//     where the controllers are bound to v1 and the v2 tree has none). v1
//     cannot clone into a cgroup, but in v1 a thread can be in a cgroup of
//     its own: the spawner's thread moves into the command's cgroup, forks,
//     and moves back, so the child is in it from its first instruction.
//     pids.max bounds the processes; the kill sets pids.max to 0 (no process
//     inside can fork any more) and then kills what cgroup.procs lists
//     until it is empty.
//   - cgroupV2: a cgroup v2 without a pids controller: the same clone and
//     kill, no process bound from the cgroup.
//
// Without any (no cgroup file system writable by the daemon), the daemon
// becomes a child subreaper (subreaper.go) and the kill walks /proc.
type cgroupKind int

const (
	cgroupNone cgroupKind = iota
	cgroupV2Pids
	cgroupV1Pids
	cgroupV2
)

func (k cgroupKind) String() string {
	switch k {
	case cgroupV2Pids:
		return "cgroup v2 with pids"
	case cgroupV1Pids:
		return "cgroup v1 pids"
	case cgroupV2:
		return "cgroup v2 without pids"
	}
	return "none"
}

// DefaultMaxProcesses bounds the processes (threads, as the pids
// controller counts) one command may have at once, where a pids cgroup is
// available. Far more than a build or a test suite needs (`make -j` on a
// large machine, a browser under test), far less than a fork bomb wants.
const DefaultMaxProcesses = 1024

// cgroups makes the per-command cgroups of one executor below dir, a
// cgroup of its own made at New and removed at Close.
type cgroups struct {
	kind    cgroupKind
	dir     string // <mount>/<the daemon's cgroup>/agentbe-<pid>-<n>
	home    string // v1: the daemon's own cgroup, where a spawner thread returns
	maxProc int64  // pids.max of each command; 0: none set
	seq     atomic.Uint64
	log     func(msg string, args ...any)
	// staleKilled: the processes that dead daemons' commands left, which
	// makeCgroups killed (removeStaleCgroups), logged once log is set.
	staleKilled int

	spare   chan *cgroup // cgroups ready for the next commands: v1 ones emptied and reset, v2 ones made ahead
	mu      sync.Mutex
	closed  bool           // close was called: removals are done in place
	cleanup sync.WaitGroup // removals in flight, awaited by close
}

// cgroupSeq numbers the executors of this process (tests make many).
var cgroupSeq atomic.Uint64

// cgroupForce, set by tests, makes New try only this kind of cgroup;
// cgroupOff makes it use none.
var cgroupForce cgroupKind

const cgroupOff cgroupKind = -1

// newCgroups finds the first kind of cgroup that works, as described on
// cgroupKind, and makes the executor's own cgroup. maxProc is the pids.max
// of each command (0: none). It returns nil when no kind works, with the
// reasons.
func newCgroups(maxProc int64, log func(string, ...any)) (*cgroups, string) {
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, "reading /proc/self/mountinfo: " + err.Error()
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, "reading /proc/self/cgroup: " + err.Error()
	}
	if cgroupForce == cgroupOff {
		return nil, "turned off by a test"
	}
	name := fmt.Sprintf("agentbe-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	var why []string
	try := func(kind cgroupKind) *cgroups {
		if cgroupForce != cgroupNone && cgroupForce != kind {
			return nil
		}
		cg, err := makeCgroups(kind, mounts, own, name, maxProc)
		if err != nil {
			why = append(why, kind.String()+": "+err.Error())
			return nil
		}
		cg.log = log
		if cg.staleKilled > 0 {
			log("killed the commands that daemons killed before left running in their cgroups",
				"processes", cg.staleKilled, "below", cg.home)
		}
		return cg
	}
	// v1 pids before plain v2, also with no bound asked for: its cgroups
	// are reused (spare), v2 ones cannot be.
	if maxProc > 0 {
		if cg := try(cgroupV2Pids); cg != nil {
			return cg, ""
		}
	}
	if cg := try(cgroupV1Pids); cg != nil {
		return cg, ""
	}
	if cg := try(cgroupV2); cg != nil {
		return cg, ""
	}
	return nil, strings.Join(why, "; ")
}

func makeCgroups(kind cgroupKind, mounts, own []byte, name string, maxProc int64) (*cgroups, error) {
	v2 := kind != cgroupV1Pids
	mnt, err := cgroupMount(mounts, v2)
	if err != nil {
		return nil, err
	}
	home, err := cgroupHome(own, mnt, v2)
	if err != nil {
		return nil, err
	}
	killed := removeStaleCgroups(home)
	cg := &cgroups{kind: kind, dir: filepath.Join(home, name), home: home, spare: make(chan *cgroup, spareCgroups), staleKilled: killed}
	if err := os.Mkdir(cg.dir, 0o755); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			cg.close()
		}
	}()
	cg.maxProc = maxProc
	switch kind {
	case cgroupV2Pids:
		ctl, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.controllers"))
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(append(append([]byte{' '}, bytes.TrimSpace(ctl)...), ' '), []byte(" pids ")) {
			return nil, fmt.Errorf("the pids controller is not enabled for %s (controllers: %q)", home, strings.TrimSpace(string(ctl)))
		}
		if err := writeCgroupFile(filepath.Join(cg.dir, "cgroup.subtree_control"), "+pids"); err != nil {
			return nil, err
		}
	case cgroupV1Pids:
		// A spawner thread must be able to return home after each fork.
		if err := unix.Access(filepath.Join(home, "tasks"), unix.W_OK); err != nil {
			return nil, fmt.Errorf("the daemon's own cgroup %s: tasks: %w", home, err)
		}
	case cgroupV2:
		cg.maxProc = 0 // no pids controller
	}
	// Make the first command's cgroup now, so a hierarchy that lets us
	// make the executor's directory but not use it is found here and not
	// at the first command.
	c, err := cg.make()
	if err != nil {
		return nil, err
	}
	cg.spare <- c
	ok = true
	return cg, nil
}

// removeStaleCgroups removes what a daemon that did not end cleanly (killed
// with SIGKILL, crashed) left below home: agentbe-<pid>-<n> of a pid that
// no longer exists, with its command cgroups (c<n>), and within those what
// a daemon run as one of its commands left in the same way (a daemon's
// tests, a daemon started by an agent), to staleCgroupDepth levels. The
// processes still in such a command cgroup are the dead daemon's commands
// (its kill reached each command's first process only, by the parent-death
// signal, or nothing under landlock and software modes' own children): they
// are killed (killLeft), so that they hold the workspace, ports and files
// no longer, except a live daemon nested in the command, which keeps
// running. A live daemon's cgroups (its spares are empty, and in use) and
// any cgroup of a name this package does not make are kept. It returns how
// many processes it killed.
func removeStaleCgroups(home string) int {
	return removeStaleIn(home, staleCgroupDepth)
}

// staleCgroupDepth bounds how deep removeStaleCgroups looks: a daemon's
// cgroup, its command's, and so on, for daemons nested 8 deep.
const staleCgroupDepth = 16

// removeStaleIn removes each agentbe-<pid>-<n> in dir whose pid is gone.
func removeStaleIn(dir string, depth int) (killed int) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	for _, d := range ents {
		if d.IsDir() && staleDaemonCgroup(dir, d.Name()) {
			killed += removeDaemonCgroup(filepath.Join(dir, d.Name()), depth-1)
		}
	}
	return killed
}

// daemonCgroupPid is the pid of a cgroup named agentbe-<pid>-<n>.
func daemonCgroupPid(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "agentbe-")
	if !ok {
		return 0, false
	}
	pidStr, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidStr)
	return pid, ok && err == nil && pid > 0
}

// staleDaemonCgroup says name, a cgroup in dir, is agentbe-<pid>-<n> of a
// daemon that no longer exists (never this process's: its own may sit
// below home). The pid in the name is the one the daemon had in its own
// pid namespace, so a pid unknown here is not enough: the daemon may live
// in another namespace in the same cgroup (a container that got no cgroup
// of its own, a daemon started under unshare --pid). The daemon lives in
// dir, the cgroup it made its own below, so it is judged alive while dir
// holds a process whose pid in its innermost namespace is that pid, or a
// process this namespace cannot see (cgroup.procs lists those as 0), or
// when dir cannot be read.
func staleDaemonCgroup(dir, name string) bool {
	pid, ok := daemonCgroupPid(name)
	if !ok || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
		return false
	}
	return !maybeInAnotherNamespace(dir, pid)
}

// maybeInAnotherNamespace says dir holds a process that could be daemon
// pid of another pid namespace (staleDaemonCgroup).
func maybeInAnotherNamespace(dir string, pid int) bool {
	procs, err := readProcs(dir)
	if err != nil {
		return true
	}
	want := strconv.Itoa(pid)
	for _, p := range procs {
		if p <= 0 {
			return true
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/status")
		if err != nil {
			continue // gone, or not ours to read
		}
		for l := range strings.SplitSeq(string(b), "\n") {
			if ns, ok := strings.CutPrefix(l, "NSpid:"); ok {
				if f := strings.Fields(ns); len(f) > 1 && f[len(f)-1] == want {
					return true
				}
				break
			}
		}
	}
	return false
}

// removeDaemonCgroup removes a dead daemon's cgroup: first its command
// cgroups (c<n>), each after the stale daemons' cgroups inside it and the
// processes left in it.
func removeDaemonCgroup(dir string, depth int) (killed int) {
	if depth <= 0 {
		return 0
	}
	if kids, err := os.ReadDir(dir); err == nil {
		for _, k := range kids {
			if !k.IsDir() || !commandCgroupName(k.Name()) {
				continue
			}
			cmd := filepath.Join(dir, k.Name())
			killed += removeStaleIn(cmd, depth-1)
			killed += killLeft(cmd)
			_ = os.Remove(cmd)
		}
	}
	_ = os.Remove(dir)
	return killed
}

// killLeft kills the processes in cmd, a dead daemon's command cgroup,
// but a live daemon run as that command: a process P with a cgroup
// agentbe-P-<n> in cmd (its own, made below the cgroup it runs in). Where
// nothing is spared, pids.max is set to 0 first (where the cgroup has
// one), so nothing inside forks while it is listed and killed; it gives up
// after 100 rounds. It returns how many processes it killed.
func killLeft(cmd string) int {
	spare := map[int]bool{os.Getpid(): true}
	if ents, err := os.ReadDir(cmd); err == nil {
		for _, e := range ents {
			if pid, ok := daemonCgroupPid(e.Name()); ok && e.IsDir() {
				spare[pid] = true
			}
		}
	}
	seen := map[int]bool{}
	for i := range 100 {
		pids, err := readProcs(cmd)
		if err != nil {
			break
		}
		left := 0
		for _, p := range pids {
			if p <= 0 { // a process of another pid namespace: not ours to judge (kill(0) would be our own group)
				return len(seen)
			}
			if spare[p] {
				continue
			}
			left++
			seen[p] = true
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		if left == 0 {
			break
		}
		if i == 0 && len(spare) == 1 {
			_ = writeCgroupFile(filepath.Join(cmd, "pids.max"), "0")
		}
		time.Sleep(time.Millisecond)
	}
	return len(seen)
}

// commandCgroupName says name is c<n>, as make names a command's cgroup.
func commandCgroupName(name string) bool {
	n, ok := strings.CutPrefix(name, "c")
	if !ok || n == "" {
		return false
	}
	_, err := strconv.ParseUint(n, 10, 64)
	return err == nil
}

// cgroupMount finds the mount point of the cgroup2 file system (v2) or of
// the v1 hierarchy with the pids controller, and the cgroup path at its
// root (not "/" when a subtree is bind-mounted, as in some containers).
func cgroupMount(table []byte, v2 bool) (mount [2]string, err error) {
	for _, m := range mountinfo.Parse(table) {
		if v2 && m.FSType == "cgroup2" {
			return [2]string{m.Point, m.Root}, nil
		}
		if !v2 && m.FSType == "cgroup" && hasOption(m.Super, "pids") {
			return [2]string{m.Point, m.Root}, nil
		}
	}
	if v2 {
		return mount, errors.New("no cgroup2 file system is mounted")
	}
	return mount, errors.New("no cgroup v1 pids hierarchy is mounted")
}

func hasOption(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// cgroupHome is the directory of the daemon's own cgroup in the hierarchy
// mounted at mnt ([mount point, root]), from /proc/self/cgroup.
func cgroupHome(own []byte, mnt [2]string, v2 bool) (string, error) {
	for l := range strings.SplitSeq(string(own), "\n") {
		// hierarchy-id:controllers:path
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if v2 && !(parts[0] == "0" && parts[1] == "") {
			continue
		}
		if !v2 && !hasOption(parts[1], "pids") {
			continue
		}
		p := parts[2]
		if root := mnt[1]; root != "/" {
			if p != root && !strings.HasPrefix(p, root+"/") {
				return "", fmt.Errorf("the daemon's cgroup %s is not below the mounted %s", p, root)
			}
			p = strings.TrimPrefix(p, root)
		}
		if strings.Contains(p, "(deleted)") {
			return "", fmt.Errorf("the daemon's cgroup %s was removed", p)
		}
		return filepath.Join(mnt[0], filepath.Clean("/"+p)), nil
	}
	return "", errors.New("/proc/self/cgroup does not name the daemon's cgroup in this hierarchy")
}

// writeCgroupFile writes v to a cgroup control file, with plain system
// calls: os.File's poller registration and finalizer are measurable on a
// path taken twice per command.
func writeCgroupFile(path, v string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	_, err = unix.Write(fd, []byte(v))
	unix.Close(fd)
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// cgroup is one command's cgroup.
type cgroup struct {
	set *cgroups
	dir string
	fd  int // v2: the directory, open for CLONE_INTO_CGROUP until the start; else -1

	mu      sync.Mutex
	zeroed  bool // v1: the kill set pids.max to 0
	retired bool // removed, or handed on as a spare: kill does nothing
}

// spareCgroups is how many command cgroups an executor keeps ready for
// the next commands: making and removing one is off the exec's path then.
// Under v1 they are the cgroups of ended commands, emptied and their bound
// written back (recycle); under v2 they are made ahead (refill), since a
// v2 cgroup that was killed is not used again.
const spareCgroups = 8

// create takes a spare command cgroup, or makes one: its directory, its
// process bound, and for v2 the descriptor CLONE_INTO_CGROUP needs.
func (s *cgroups) create() (*cgroup, error) {
	select {
	case c := <-s.spare:
		return c, nil
	default:
	}
	return s.make()
}

// make makes a new command cgroup, as create describes.
func (s *cgroups) make() (*cgroup, error) {
	c := &cgroup{set: s, dir: filepath.Join(s.dir, "c"+strconv.FormatUint(s.seq.Add(1), 10)), fd: -1}
	if err := os.Mkdir(c.dir, 0o755); err != nil {
		return nil, err
	}
	if err := c.setMax(); err != nil {
		_ = os.Remove(c.dir)
		return nil, err
	}
	if s.kind != cgroupV1Pids {
		fd, err := unix.Open(c.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			_ = os.Remove(c.dir)
			return nil, err
		}
		c.fd = fd
	}
	return c, nil
}

// refill makes a new spare cgroup in the place of one removed (v2, whose
// cgroups are never reused): the mkdir and the open are then off the next
// command's path. Nothing is made once the executor closes.
func (s *cgroups) refill() {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed || len(s.spare) == cap(s.spare) {
		return
	}
	c, err := s.make()
	if err != nil {
		return // create makes one on the command's path, and says why
	}
	select {
	case s.spare <- c:
	default:
		c.discard()
	}
}

// discard removes a spare cgroup that never held a process.
func (c *cgroup) discard() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	_ = os.Remove(c.dir)
}

// setMax writes the process bound of c (and after a v1 kill, which set it
// to 0, writes it back).
func (c *cgroup) setMax() error {
	switch {
	case c.set.maxProc > 0:
		return writeCgroupFile(filepath.Join(c.dir, "pids.max"), strconv.FormatInt(c.set.maxProc, 10))
	case c.set.kind == cgroupV1Pids:
		return writeCgroupFile(filepath.Join(c.dir, "pids.max"), "max")
	}
	return nil
}

// prepare sets up cmd's attributes so that it starts inside c (v2).
func (c *cgroup) prepare(attr *syscall.SysProcAttr) {
	if c.fd >= 0 {
		attr.UseCgroupFD = true
		attr.CgroupFD = c.fd
	}
}

// start runs start with the spawner it must fork through, so that what it
// forks is inside c: under v1, sp's view that moves the thread taking the
// start into c for the fork and back after it. Each spawner thread moves
// only itself (its own tid in tasks), so starts into different cgroups run
// on different threads at once.
func (c *cgroup) start(sp *spawner, start func(*spawner) error) error {
	if c.set.kind != cgroupV1Pids {
		err := start(sp)
		unix.Close(c.fd)
		c.fd = -1
		return err
	}
	return start(sp.in(c))
}

// enterAndStart starts cmd from the calling spawner thread inside c (v1):
// the thread enters c and forks; leave takes it back to the daemon's
// cgroup once the caller has heard back.
func (c *cgroup) enterAndStart(cmd *exec.Cmd) error {
	if err := writeCgroupFile(filepath.Join(c.dir, "tasks"), strconv.Itoa(unix.Gettid())); err != nil {
		return fmt.Errorf("entering the command's cgroup %s: %w", c.dir, err)
	}
	return cmd.Start()
}

// leave moves the calling spawner thread from c back to the daemon's
// cgroup (after enterAndStart, failed or not). Until it has, c counts the
// thread as one of its tasks and lists the daemon's pid in cgroup.procs:
// kill skips that pid, recycle does not keep c as a spare, and remove
// retries while the thread is inside.
func (c *cgroup) leave() {
	if err := writeCgroupFile(filepath.Join(c.set.home, "tasks"), strconv.Itoa(unix.Gettid())); err != nil {
		// The thread stays in c: c's kill spares the daemon (kill skips
		// its pid), and the thread's next start moves it on.
		c.set.log("a spawner thread could not leave a command's cgroup", "cgroup", c.dir, "err", err)
	}
}

// kill kills every process in c, and keeps none from starting. A kill of a
// cgroup that was retired (removed, or handed on as a spare under a new
// cgroup value) does nothing: a command's late kill (its timeout firing as
// it ends) must not reach the next command.
func (c *cgroup) kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.retired {
		c.killLocked()
	}
}

// killLocked is kill with c.mu held; it reports whether it saw c empty at
// the end.
func (c *cgroup) killLocked() bool {
	self := os.Getpid()
	if c.set.kind != cgroupV1Pids {
		if err := writeCgroupFile(filepath.Join(c.dir, "cgroup.kill"), "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.set.log("cgroup.kill failed", "cgroup", c.dir, "err", err)
		}
		pids, err := c.procs()
		return err == nil && len(pids) == 0
	}
	// An empty cgroup stays empty: only a process inside can fork into it.
	// Otherwise no fork succeeds in c once pids.max is 0, so the set of
	// processes can only shrink; a fork that was charged before that write
	// may attach its child just after a listing, hence the loop.
	for i := range 100 {
		pids, err := c.procs()
		if err != nil {
			return false
		}
		killed := 0
		for _, p := range pids {
			if p != self { // a spawner thread, if it could not leave
				killed++
			}
		}
		if killed == 0 {
			return true
		}
		if i == 0 {
			_ = writeCgroupFile(filepath.Join(c.dir, "pids.max"), "0")
			c.zeroed = true
		}
		for _, p := range pids {
			if p != self {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// procs lists the processes in c.
func (c *cgroup) procs() ([]int, error) { return readProcs(c.dir) }

// readProcs lists the processes in the cgroup dir.
func readProcs(dir string) ([]int, error) {
	path := filepath.Join(dir, "cgroup.procs")
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var buf [512]byte
	var b []byte
	for {
		n, err := unix.Read(fd, buf[:])
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		b = append(b, buf[:n]...)
	}
	var out []int
	for f := range strings.FieldsSeq(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// drop kills what is left in c and removes it, in the background: the
// processes killed may take a moment to exit. A cgroup that is never
// empty (a process stuck in the kernel) is left after a minute, logged.
// After the executor's Close (a process waited for late) the removal is
// done in place, and then the executor's own cgroup is removed too.
func (c *cgroup) drop() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
	s := c.set
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.kill()
		c.remove(time.Second)
		s.removedAfterClose()
		return
	}
	s.cleanup.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.cleanup.Done()
		if c.recycle() {
			return
		}
		c.remove(time.Minute)
		if s.kind != cgroupV1Pids {
			s.refill()
		}
	}()
}

// recycle keeps c, found empty after its kill, as a spare when there is
// room: nothing can enter it but by a write to its cgroup.procs. Only v1
// cgroups are kept: a v2 cgroup that was killed through cgroup.kill kills
// what is cloned into it later (seen on Linux 6.18).
func (c *cgroup) recycle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.retired || !c.killLocked() || c.set.kind != cgroupV1Pids {
		return false
	}
	// killLocked spares the daemon's own pid: a spawner thread that has
	// not left yet (leave runs after its caller heard back). A spare
	// holds nothing, so c goes to remove, which waits for the thread.
	if pids, err := c.procs(); err != nil || len(pids) != 0 {
		return false
	}
	if c.zeroed {
		if c.setMax() != nil {
			return false
		}
	}
	select {
	case c.set.spare <- &cgroup{set: c.set, dir: c.dir, fd: -1}:
		c.retired = true
		return true
	default:
		return false
	}
}

// remove removes c, retrying (and killing what is in it) for up to limit.
func (c *cgroup) remove(limit time.Duration) {
	wait := time.Millisecond
	for deadline := time.Now().Add(limit); ; {
		c.mu.Lock()
		err := os.Remove(c.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			c.retired = true
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			c.set.log("a command's cgroup is still busy after its kill; left in place", "cgroup", c.dir, "waited", limit, "err", err)
			return
		}
		time.Sleep(wait)
		c.kill()
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// removedAfterClose removes the executor's cgroup once the last command's
// is gone, when that happens after close.
func (s *cgroups) removedAfterClose() {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		_ = os.Remove(s.dir) // fails while other commands' cgroups remain
	}
}

// close waits for the removals in flight and removes the executor's
// cgroup; if a command started with Start is not waited for yet, its
// cgroup stays, and the executor's goes when that command's does.
func (s *cgroups) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cleanup.Wait()
	for {
		select {
		case c := <-s.spare:
			c.discard()
			continue
		default:
		}
		break
	}
	_ = os.Remove(s.dir)
}

// setupProcessBound makes the executor's cgroups and decides what bounds
// the processes of a command (Config.MaxProcesses): the pids cgroup where
// there is one. Without one, an explicit bound becomes RLIMIT_NPROC set by
// the shell's ulimit (per user, and it turns the direct fast path off) for
// a command that does not run as root, which the kernel exempts; the
// default bound is then dropped, said in the log, so that the default never
// costs the direct path. It returns the Rlimits the shell applies.
func (e *executor) setupProcessBound(cfg Config) (Rlimits, error) {
	rl := cfg.Rlimits
	maxProc := cfg.MaxProcesses
	explicit := maxProc > 0
	switch {
	case maxProc == 0:
		maxProc = DefaultMaxProcesses
	case maxProc < 0:
		maxProc = 0
	}
	var why string
	e.cgroups, why = newCgroups(maxProc, e.log.Warn)
	if e.cgroups == nil {
		e.log.Info("no cgroup for commands; the kill walks /proc and the daemon adopts escaped processes as a subreaper (bwrap mode needs neither)", "why", why)
	} else {
		e.log.Info("every command runs in a cgroup of its own", "kind", e.cgroups.kind.String(), "cgroup", e.cgroups.dir)
	}
	if maxProc == 0 || (e.cgroups != nil && e.cgroups.maxProc > 0) {
		return rl, nil
	}
	uid := uint32(os.Geteuid())
	if e.cred != nil {
		uid = e.cred.Uid
	}
	switch {
	case !explicit:
		e.log.Warn("no pids cgroup, so the default bound on the processes of a command is not applied; set --exec-max-processes to apply it as RLIMIT_NPROC (per user, not for root) through the shell",
			"default", maxProc, "why", why)
	case uid == 0:
		e.log.Warn("nothing bounds the processes of a command: there is no pids cgroup and commands run as root, which RLIMIT_NPROC does not bind",
			"exec_max_processes", maxProc, "why", why)
	case rl.Processes == 0 && (e.shellKind == "bash" || e.shellKind == "dash"):
		rl.Processes = maxProc
		e.log.Info("no pids cgroup; --exec-max-processes is applied as RLIMIT_NPROC (per user) by the shell, so every command runs through the shell",
			"exec_max_processes", maxProc)
	case rl.Processes == 0:
		e.log.Warn("nothing bounds the processes of a command: there is no pids cgroup and this shell cannot set RLIMIT_NPROC; use bash or dash",
			"exec_max_processes", maxProc)
	}
	return rl, nil
}

// startIn starts c's command with start (startCmd) inside a new cgroup of
// its own, when the executor has cgroups.
func (e *executor) startIn(sp *spawner, c *child, start func(*spawner) (*exec.Cmd, error)) (*exec.Cmd, error) {
	// Every main process is registered with the subreaper (subreaper.go),
	// also here with a cgroup: another executor of this daemon may run
	// without one, and its reaper must not take this one's processes.
	var cmd *exec.Cmd
	registered := func(start func() error) error {
		err := startRegistered(func() (int, error) {
			if err := start(); err != nil {
				return 0, err
			}
			return cmd.Process.Pid, nil
		})
		c.registered = err == nil
		return err
	}
	if e.cgroups == nil {
		c.sweeps = e.reaper
		err := registered(func() error {
			var err error
			cmd, err = start(sp)
			return err
		})
		return cmd, err
	}
	cg, err := e.cgroups.create()
	if err != nil {
		return c.cmd, fmt.Errorf("creating the command's cgroup below %s: %w", e.cgroups.dir, err)
	}
	cg.prepare(c.cmd.SysProcAttr)
	err = registered(func() error {
		return cg.start(sp, func(sp *spawner) error {
			var err error
			cmd, err = start(sp)
			return err
		})
	})
	if err != nil {
		cg.drop()
		return cmd, err
	}
	c.cg = cg
	return cmd, nil
}

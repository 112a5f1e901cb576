package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// Modes of system.run.
const (
	ModeDeny      = "deny"      // nothing runs
	ModeAllowlist = "allowlist" // only allowlisted executables in allowed directories
	ModeFull      = "full"      // anything the denylist and the sandbox allow
)

// Ask settings.
const (
	AskOff    = "off"     // a miss is refused
	AskOnMiss = "on-miss" // a miss waits for the operator
	AskAlways = "always"  // every call waits for the operator (unless an "always" approval covers it)
)

// DefaultApprovalTTL is how long a pending approval may wait.
const DefaultApprovalTTL = 10 * time.Minute

// Bounds of the requests that wait for the operator, so that a client
// cannot make the daemon hold memory without bound by sending calls that
// miss the allowlist: at most MaxPendingPerWorkspace wait for one
// workspace (the caller's root or scope) and MaxPending in all, each of at
// most MaxPendingBytes of argv, cwd and env. A call past a bound is
// refused (nothing is stored) until the operator decides or requests
// expire.
const (
	MaxPendingPerWorkspace = 32
	MaxPending             = 256
	MaxPendingBytes        = 64 << 10
)

// Policy is the --exec-approvals file, in the shape docs/gateway-tools.md gives.
type Policy struct {
	Allowlist struct {
		// Commands are program names (looked up on the PATH commands get)
		// or absolute paths; a call matches by the executable it resolves to.
		Commands []string `json:"commands"`
		// CwdPrefix are directories a call's cwd must be in; $workspaceRoot
		// is the workspace. Empty: anywhere in the workspace.
		CwdPrefix []string `json:"cwdPrefix"`
	} `json:"allowlist"`
	Denylist struct {
		// Patterns are regular expressions matched against the argv joined
		// by spaces; a match always refuses, in every mode.
		Patterns []string `json:"patterns"`
	} `json:"denylist"`
}

// RunRequest is what an approval binds to.
type RunRequest struct {
	Argv []string          `json:"argv"`
	Cwd  string            `json:"cwd"` // absolute
	Env  map[string]string `json:"env,omitempty"`
	// Exe is the file that runs: argv[0] resolved with the PATH the
	// command gets, symlinks followed (absolute).
	Exe string `json:"executable"`
	// Digest ("sha256:<hex>") is the content of a program in the
	// workspace, which the agent can rewrite: the approval binds it, and a
	// sealed copy of exactly that content is what runs.
	Digest string `json:"digest,omitempty"`
}

func (r RunRequest) equal(o RunRequest) bool {
	return slices.Equal(r.Argv, o.Argv) && r.Cwd == o.Cwd && maps.Equal(r.Env, o.Env) && r.Exe == o.Exe && r.Digest == o.Digest
}

// Pending is a call waiting for the operator.
type Pending struct {
	ID      string     `json:"requestId"`
	Request RunRequest `json:"request"`
	Reason  string     `json:"reason"` // why it needs approval
	Created time.Time  `json:"created"`
	Expires time.Time  `json:"expires"`
	// State is pending, approved, denied or expired; an approved request
	// runs once, when the agent calls system.run with its requestId.
	State string `json:"state"`
	// Always says an "always" approval put the executable in the policy
	// file; Note says why an "always" was taken as once only (a program
	// the agent can change).
	Always bool   `json:"always,omitempty"`
	Note   string `json:"note,omitempty"`
	// owner is the workspace (root or scope) of the caller that asked:
	// only a caller of that same workspace may take the approved request.
	owner string
}

// Decision is Check's answer.
type Decision struct {
	Allow   bool
	Pending *Pending // set when the call waits for the operator
	Reason  string   // why it was refused or why it waits
}

// Approvals applies the policy to system.run calls and keeps the pending
// approvals. It is safe for concurrent use.
type Approvals struct {
	path, mode, ask, root string
	ttl                   time.Duration
	now                   func() time.Time

	mu      sync.Mutex
	policy  Policy
	deny    []*regexp.Regexp
	pending map[string]*Pending
}

// MaxApprovalsFile bounds the --exec-approvals file.
const MaxApprovalsFile = 4 << 20

// LoadApprovals reads the policy file (path "" is an empty policy) and
// checks mode and ask.
func LoadApprovals(path, mode, ask, workspaceRoot string, ttl time.Duration) (*Approvals, error) {
	switch mode {
	case ModeDeny, ModeAllowlist, ModeFull:
	default:
		return nil, fmt.Errorf("mode %q: use %s, %s or %s", mode, ModeDeny, ModeAllowlist, ModeFull)
	}
	switch ask {
	case AskOff, AskOnMiss, AskAlways:
	default:
		return nil, fmt.Errorf("ask %q: use %s, %s or %s", ask, AskOff, AskOnMiss, AskAlways)
	}
	if ttl <= 0 {
		ttl = DefaultApprovalTTL
	}
	a := &Approvals{path: path, mode: mode, ask: ask, root: workspaceRoot, ttl: ttl, now: time.Now, pending: map[string]*Pending{}}
	if path != "" {
		// It says which commands run unasked: read as every file that
		// grants rights is (opfile.Read: a regular file, without blocking,
		// at most MaxApprovalsFile, and refused when a user other than
		// root and the daemon's could change it).
		data, err := opfile.Read(path, MaxApprovalsFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a.policy); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		// One object and nothing after it: a second object (a denylist
		// appended to the file) would otherwise be silently ignored.
		if _, err := dec.Token(); err != io.EOF {
			return nil, fmt.Errorf("%s: more after the policy's object (offset %d); the file is one JSON object", path, dec.InputOffset())
		}
	}
	for i, p := range a.policy.Denylist.Patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: denylist.patterns[%d] %q: %v", path, i, p, err)
		}
		a.deny = append(a.deny, re)
	}
	for i, c := range a.policy.Allowlist.Commands {
		if c == "" || (strings.Contains(c, "/") && !filepath.IsAbs(c)) {
			return nil, fmt.Errorf("%s: allowlist.commands[%d] %q: a program name or an absolute path", path, i, c)
		}
	}
	return a, nil
}

// Check decides a call of the caller whose workspace (root or scope) is
// owner. A pending decision is stored, for that workspace only, and
// returned with its requestId.
func (a *Approvals) Check(owner string, req RunRequest) Decision {
	line := strings.Join(req.Argv, " ")
	// The argv as it runs, argv[0] the file it resolved to: a pattern
	// naming a program matches it under any name or link.
	resolved := strings.Join(append([]string{req.Exe}, req.Argv[1:]...), " ")
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, re := range a.deny {
		if re.MatchString(line) || (req.Exe != "" && re.MatchString(resolved)) {
			return Decision{Reason: fmt.Sprintf("the denylist refuses it (pattern %q)", re.String())}
		}
	}
	if a.mode == ModeDeny {
		return Decision{Reason: "system.run is off (--exec-approval-mode deny)"}
	}
	listed, why := a.allowlisted(req)
	if name, reason := codeEnv(req.Env); listed && name != "" {
		// The allowlist names programs; with this variable the program
		// runs other code (git's GIT_CONFIG_*: core.fsmonitor; PATH: the
		// programs it starts), so the program's name says nothing of
		// what runs.
		listed, why = false, fmt.Sprintf("env sets %s, which can make the command run other code (%s)", name, reason)
	}
	if a.ask == AskAlways && !(listed && a.mode == ModeAllowlist && a.alwaysRule(req)) {
		return a.wait(owner, req, "every call needs the operator's approval (ask always)")
	}
	if a.mode == ModeFull || listed {
		return Decision{Allow: true}
	}
	if a.ask == AskOnMiss {
		return a.wait(owner, req, why)
	}
	return Decision{Reason: why}
}

// wait stores req as pending for owner, within the bounds (a.mu held).
func (a *Approvals) wait(owner string, req RunRequest, why string) Decision {
	a.expire()
	size := len(req.Cwd) + len(req.Exe)
	for _, s := range req.Argv {
		size += len(s)
	}
	for k, v := range req.Env {
		size += len(k) + len(v)
	}
	if size > MaxPendingBytes {
		return Decision{Reason: fmt.Sprintf("%s, and the request (%d bytes of argv, cwd and env) is over the %d bytes a request waiting for the operator may hold", why, size, MaxPendingBytes)}
	}
	mine := 0
	for _, p := range a.pending {
		if p.owner == owner {
			mine++
		}
	}
	switch {
	case mine >= MaxPendingPerWorkspace:
		return Decision{Reason: fmt.Sprintf("%s, and %d requests of this workspace already wait for the operator (the limit): wait for the operator's decisions, or for them to expire", why, mine)}
	case len(a.pending) >= MaxPending:
		return Decision{Reason: fmt.Sprintf("%s, and %d requests already wait for the operator (the limit): wait for the operator's decisions, or for them to expire", why, len(a.pending))}
	}
	return Decision{Pending: a.newPending(owner, req, why), Reason: "waiting for the operator"}
}

// codeEnv returns the first variable of env (PATH, then in name order) that
// can make a program run other code (sandbox.EnvRunsCode), and why. PATH
// is one: it chose the program (the request's executable shows which), and
// it chooses every program that program starts by name (make's cc, git's
// ssh and hooks).
func codeEnv(env map[string]string) (string, string) {
	if _, ok := env["PATH"]; ok {
		return "PATH", "it chooses the programs the command and what it starts run"
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if ok, why := sandbox.EnvRunsCode(k); ok {
			return k, why
		}
	}
	return "", ""
}

// alwaysRule: the executable was approved "always" (it is in the file).
func (a *Approvals) alwaysRule(req RunRequest) bool {
	return !a.inWorkspace(req) && slices.Contains(a.policy.Allowlist.Commands, req.Exe)
}

// inWorkspace: the program is in the workspace (the agent can rewrite it).
func (a *Approvals) inWorkspace(req RunRequest) bool {
	return req.Digest != "" || (a.root != "" && inside(a.root, req.Exe))
}

// bindsContent: req's program is in the workspace and a call of it may
// wait for the operator (allowlist mode, which never covers it, unless ask
// is off; full mode with ask always), whose approval must then bind its
// content.
func (a *Approvals) bindsContent(req RunRequest) bool {
	if !a.inWorkspace(req) {
		return false
	}
	switch a.mode {
	case ModeAllowlist:
		return a.ask != AskOff
	case ModeFull:
		return a.ask == AskAlways
	}
	return false
}

// allowlisted reports whether the executable and the cwd are allowed, and
// if not, why. A program in the workspace never is: the allowlist names
// programs, and the agent can put anything under a name there.
func (a *Approvals) allowlisted(req RunRequest) (bool, string) {
	if a.inWorkspace(req) {
		why := fmt.Sprintf("%s (%s) is in the workspace, which the agent can change: the allowlist does not cover it", req.Argv[0], req.Exe)
		if req.Digest != "" {
			why += ", and an approval binds its content (" + req.Digest + ")"
		}
		return false, why
	}
	exeOK := false
	for _, c := range a.policy.Allowlist.Commands {
		resolved := c
		if !filepath.IsAbs(c) {
			p, err := sandbox.LookPath(c, nil)
			if err != nil {
				continue
			}
			resolved = p
		}
		if real, err := filepath.EvalSymlinks(resolved); err == nil {
			resolved = real
		}
		if resolved == req.Exe {
			exeOK = true
			break
		}
	}
	if !exeOK {
		return false, fmt.Sprintf("%s (%s) is not in the allowlist", req.Argv[0], req.Exe)
	}
	prefixes := a.policy.Allowlist.CwdPrefix
	if len(prefixes) == 0 {
		return true, ""
	}
	for _, p := range prefixes {
		p = strings.ReplaceAll(p, "$workspaceRoot", a.root)
		if req.Cwd == p || strings.HasPrefix(req.Cwd, strings.TrimSuffix(p, "/")+"/") {
			return true, ""
		}
	}
	return false, fmt.Sprintf("the cwd %s is not under an allowed prefix", req.Cwd)
}

func (a *Approvals) newPending(owner string, req RunRequest, why string) *Pending {
	var b [12]byte
	rand.Read(b[:])
	now := a.now()
	p := &Pending{ID: hex.EncodeToString(b[:]), Request: req, Reason: why, Created: now, Expires: now.Add(a.ttl), State: "pending", owner: owner}
	a.pending[p.ID] = p
	cp := *p
	return &cp
}

// expire drops what waited too long (a.mu held).
func (a *Approvals) expire() {
	now := a.now()
	for id, p := range a.pending {
		if now.After(p.Expires) {
			delete(a.pending, id)
		}
	}
}

// List is every request waiting for the operator.
func (a *Approvals) List() []Pending {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire()
	out := []Pending{}
	for _, p := range a.pending {
		if p.State == "pending" {
			out = append(out, *p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// ErrNoRequest: no pending request has that id (or it expired).
var ErrNoRequest = errors.New("no such request (it never existed, was decided, or expired)")

// Decide records the operator's decision. With always, the executable is
// added to the policy file's allowlist (written atomically) so later calls
// need no approval, unless the agent could change the program (one in the
// workspace, or one a user other than root may write): then it is approved
// once, and Note says why.
func (a *Approvals) Decide(id string, approved, always bool) (Pending, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire()
	p, ok := a.pending[id]
	if !ok || p.State != "pending" {
		return Pending{}, ErrNoRequest
	}
	if !approved {
		p.State = "denied"
		delete(a.pending, id)
		return *p, nil
	}
	p.State = "approved"
	if always {
		if why := a.changeable(p.Request); why != "" {
			p.Note = "approved once, not always: " + why
		} else if err := a.persist(p.Request.Exe); err != nil {
			p.State = "pending"
			return Pending{}, err
		} else {
			p.Always = true
		}
	}
	return *p, nil
}

// changeable says why the agent could change what runs as req's program,
// which an "always" approval must then not cover ("" when it cannot): a
// program in the workspace, or one that a user other than root may
// write, or whose directory (or one above it) such a user may change —
// an owner other than root (who may chmod it), or group or other write
// permission.
//
// This is not the sandbox helper's check (sandbox/trampoline.go,
// openHelper), though both judge a program file: that one validates once,
// at start, a program of the daemon's own installation that it then runs
// only through the descriptor it checked, so the daemon's user may own it
// and only its own directories count. An always rule outlives this check
// and names a path that is resolved again at every later call, against an
// agent whose commands may run as the daemon's user: so only root may own
// the file and every directory up to /, and a sticky directory is no
// exception.
func (a *Approvals) changeable(req RunRequest) string {
	if a.inWorkspace(req) {
		return fmt.Sprintf("%s is in the workspace, which the agent can change; an always rule would allow whatever it holds later", req.Exe)
	}
	for p := req.Exe; ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Sprintf("%s: %v", p, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
			return fmt.Sprintf("%s: no owner known", p)
		case st.Uid != 0:
			return fmt.Sprintf("%s is owned by uid %d, not root: a command running as that user could change it", p, st.Uid)
		case fi.Mode().Perm()&0o022 != 0:
			return fmt.Sprintf("%s may be written by users other than root (mode %v)", p, fi.Mode().Perm())
		}
		if p == "/" || p == "." {
			return ""
		}
	}
}

// Take returns the approved request for id, once: the stored request is what
// runs, whatever the agent sends with the id. Only a caller of the
// workspace that asked (owner) may take it; for any other the id is
// unknown, and the request stays for its own workspace.
func (a *Approvals) Take(id, owner string) (RunRequest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expire()
	p, ok := a.pending[id]
	if !ok || p.owner != owner {
		return RunRequest{}, ErrNoRequest
	}
	if p.State != "approved" {
		return RunRequest{}, fmt.Errorf("request %s is still waiting for the operator", id)
	}
	delete(a.pending, id)
	return p.Request, nil
}

// persist adds exe to the file's allowlist.commands (a.mu held).
func (a *Approvals) persist(exe string) error {
	if a.path == "" {
		return errors.New("no --exec-approvals file to remember an always approval in")
	}
	if slices.Contains(a.policy.Allowlist.Commands, exe) {
		return nil
	}
	next := a.policy
	next.Allowlist.Commands = append(slices.Clone(a.policy.Allowlist.Commands), exe)
	data, err := json.MarshalIndent(next, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(a.path), ".exec-approvals-*")
	if err != nil {
		return fmt.Errorf("writing %s: %v", a.path, err)
	}
	_, err = tmp.Write(append(data, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), a.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %v", a.path, err)
	}
	a.policy = next
	return nil
}

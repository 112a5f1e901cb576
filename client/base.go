package client

import (
	"context"
	"errors"
	"io"
	"maps"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// LogOptions choose a backend's operations log; the zero value logs nothing.
type LogOptions struct {
	Log  OpLogger
	Mode LogMode
}

// base implements Backend over a driver: it is the one place for the rules all
// kinds share. A root backend (Local, Memory, Remote) owns its lifecycle; a
// Scoped shares its root's and adds a destroyed flag of its own.
type base struct {
	drv    driver
	life   *lifecycle
	env    map[string]string // merged env of this backend and its scopes
	log    LogOptions
	kind   string
	scoped *Scoped // set on a scope's base: its own destroyed state and parent
}

func newBase(drv driver, initial Status, env map[string]string, log LogOptions) *base {
	return &base{drv: drv, life: newLifecycle(initial), env: maps.Clone(env), log: log, kind: drv.kind()}
}

func (b *base) Kind() string    { return b.kind }
func (b *base) RootDir() string { return b.drv.root() }

// Status is the root's status; a destroyed scope is destroyed whatever its
// root's status.
func (b *base) Status() Status {
	if b.scoped != nil && b.scoped.isDestroyed() {
		return StatusDestroyed
	}
	return b.life.get()
}

func (b *base) OnStatusChange(fn func(StatusChange)) (cancel func()) {
	return b.life.subscribe(fn)
}

func (b *base) Track(c io.Closer) { b.life.track(c) }

// alive is the check every operation starts with.
func (b *base) alive(op, path string) error {
	if b.Status() == StatusDestroyed {
		return destroyedError(op, path)
	}
	return nil
}

// logged runs one operation and hands its entry to the logger. An error is
// reported as a failure of this operation ("read", not the "resolve" the
// file door failed in), naming the path or command as given.
func (b *base) logged(e Entry, run func(*Entry) error) error {
	if err := b.alive(e.Op, e.Path+e.Command); err != nil {
		return err
	}
	do := func(e *Entry) error {
		err := run(e)
		var ce *errcode.Error
		if errors.As(err, &ce) && ce.Op != e.Op {
			return ce.WithOp(e.Op)
		}
		return err
	}
	if b.log.Log == nil || (b.log.Mode == LogStandard && !modifying(e.Op)) {
		return do(&e)
	}
	e.Time = time.Now()
	e.Workspace = b.drv.root()
	err := do(&e)
	e.Duration = time.Since(e.Time)
	e.Success = err == nil
	e.Err = err
	b.log.Log.LogOp(e)
	return err
}

func (b *base) Read(ctx context.Context, p string) (data []byte, err error) {
	err = b.logged(Entry{Op: "read", Path: p}, func(*Entry) (err error) {
		data, err = b.drv.read(ctx, p)
		return err
	})
	return data, err
}

func (b *base) Write(ctx context.Context, p string, content []byte) error {
	return b.logged(Entry{Op: "write", Path: p}, func(*Entry) error { return b.drv.write(ctx, p, content) })
}

func (b *base) Readdir(ctx context.Context, p string) (names []string, err error) {
	err = b.logged(Entry{Op: "readdir", Path: p}, func(*Entry) (err error) {
		names, err = b.drv.readdir(ctx, p)
		return err
	})
	return names, err
}

func (b *base) Mkdir(ctx context.Context, p string, opts MkdirOptions) error {
	return b.logged(Entry{Op: "mkdir", Path: p}, func(*Entry) error { return b.drv.mkdir(ctx, p, opts) })
}

func (b *base) Exists(ctx context.Context, p string) (ok bool, err error) {
	err = b.logged(Entry{Op: "exists", Path: p}, func(*Entry) (err error) {
		ok, err = b.drv.exists(ctx, p)
		return err
	})
	return ok, err
}

func (b *base) Stat(ctx context.Context, p string) (fi FileInfo, err error) {
	err = b.logged(Entry{Op: "stat", Path: p}, func(*Entry) (err error) {
		fi, err = b.drv.stat(ctx, p)
		return err
	})
	return fi, err
}

func (b *base) Rm(ctx context.Context, p string, opts RmOptions) error {
	return b.logged(Entry{Op: "rm", Path: p}, func(*Entry) error { return b.drv.rm(ctx, p, opts) })
}

func (b *base) Rename(ctx context.Context, from, to string) error {
	return b.logged(Entry{Op: "rename", Path: from, NewPath: to}, func(*Entry) error { return b.drv.rename(ctx, from, to) })
}

func (b *base) Touch(ctx context.Context, p string) error {
	return b.logged(Entry{Op: "touch", Path: p}, func(*Entry) error { return b.drv.touch(ctx, p) })
}

// Exec merges the environment (backend and scopes as base, the call's Env
// over it) and runs the command through the driver.
func (b *base) Exec(ctx context.Context, command string, opts ExecOptions) (out []byte, err error) {
	err = b.logged(Entry{Op: "exec", Command: command}, func(e *Entry) error {
		if len(b.env) > 0 {
			env := maps.Clone(b.env)
			maps.Copy(env, opts.Env)
			opts.Env = env
		}
		var err error
		out, err = b.drv.exec(ctx, command, opts)
		e.Stdout = out
		if xe := (*ExitError)(nil); errors.As(err, &xe) {
			e.Stdout, e.Stderr = xe.Stdout, xe.Stderr
		}
		return err
	})
	return out, err
}

// Scope builds a Scoped on the driver's scope: the path is checked at this
// level, env and logger are inherited and merged, and the lifecycle is the
// root's.
func (b *base) Scope(p string, opts ScopeOptions) (*Scoped, error) {
	if err := b.alive("scope", p); err != nil {
		return nil, err
	}
	drv, err := b.drv.scope(p)
	if err != nil {
		return nil, err
	}
	env := maps.Clone(b.env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, opts.Env)
	log := b.log
	if opts.Log != nil {
		log.Log = opts.Log
	}
	s := &Scoped{parent: b}
	s.base = &base{drv: drv, life: b.life, env: env, log: log, kind: "scoped", scoped: s}
	b.life.addChild(s)
	return s, nil
}

func (b *base) MCPTransport(ctx context.Context, opts MCPOptions) (mcp.Transport, error) {
	if err := b.alive("mcp", opts.ScopePath); err != nil {
		return nil, err
	}
	t, err := b.drv.mcpTransport(ctx, opts)
	if err != nil {
		return nil, err
	}
	if c, ok := t.(io.Closer); ok {
		b.Track(c)
	}
	return t, nil
}

func (b *base) MCPClient(ctx context.Context, opts MCPOptions) (*mcp.ClientSession, error) {
	t, err := b.MCPTransport(ctx, opts)
	if err != nil {
		return nil, err
	}
	c := opts.Client
	if c == nil {
		c = mcp.NewClient(&mcp.Implementation{Name: "agentbe-go-client", Version: "1"}, nil)
	}
	cs, err := c.Connect(ctx, t, nil)
	if err != nil {
		// The SDK's error carries the daemon's answer (a refused token, a
		// root that is not the daemon's): say it, not only that it failed.
		return nil, &errcode.Error{Code: errcode.ConnectionClosed, Op: "mcp", Path: opts.ScopePath, Msg: "MCP connect failed: " + err.Error(), Err: err}
	}
	b.Track(cs)
	return cs, nil
}

// Destroy of a root backend: the lifecycle (status, then the tracked
// resources), then the driver's own resources.
func (b *base) Destroy() error {
	if b.scoped != nil {
		return b.scoped.destroy()
	}
	did, err := b.life.destroy()
	if !did {
		return nil
	}
	if cerr := b.drv.close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

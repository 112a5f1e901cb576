package extensions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"slices"
	"strings"
	"time"

	"go.starlark.net/lib/math"
	sltime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// Thread locals of a call: Go state Starlark code cannot see.
const (
	localCtx = "agentbe.ctx"
	localExt = "agentbe.ext"
	localWS  = "agentbe.ws"
	// localReadOnly is set for a read-only token's call: its workspace
	// refuses changes (fsops.ReadOnly), postgres.execute refuses too, and
	// postgres.query runs in a READ ONLY transaction.
	localReadOnly = "agentbe.readonly"
)

// callState is what a module needs from the call it runs in; outside a
// call (while a file loads) the modules that act refuse.
func callState(thread *starlark.Thread, fn string) (context.Context, *Extension, fsops.Workspace, error) {
	ctx, _ := thread.Local(localCtx).(context.Context)
	ext, _ := thread.Local(localExt).(*Extension)
	ws, _ := thread.Local(localWS).(fsops.Workspace)
	if ctx == nil || ext == nil {
		return nil, nil, nil, fmt.Errorf("%s: only inside a tool handler (not while the file loads)", fn)
	}
	return ctx, ext, ws, nil
}

// predeclared is what every file sees: the constructors, the modules, and
// str, repr, print and fail in place of Starlark's own (bounded: text.go).
func (p *Provider) predeclared() starlark.StringDict {
	d := constructors()
	for name, fn := range boundedBuiltins() {
		d[name] = fn
	}
	d["time"] = timeModule()
	d["math"] = math.Module
	d["json"] = jsonModule()
	d["exec"] = p.execModule()
	d["http"] = p.httpModule()
	d["fs"] = p.fsModule()
	d["env"] = p.envModule()
	d["sqlite"] = p.sqliteModule()
	d["postgres"] = p.postgresModule()
	return d
}

// timeModule is go.starlark.net's time module with now() as starlark-mcp
// has it: the Unix time in whole seconds, an int (time.now() % len(facts)).
// now_time() is the module's own now(), a time value (time.now_time().year).
func timeModule() *starlarkstruct.Module {
	m := &starlarkstruct.Module{Name: "time", Members: starlark.StringDict{}}
	for k, v := range sltime.Module.Members {
		m.Members[k] = v
	}
	m.Members["now_time"] = sltime.Module.Members["now"]
	m.Members["now"] = starlark.NewBuiltin("time.now", func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
			return nil, err
		}
		// The thread's clock when it has one, as the module's own now().
		t := time.Now()
		if clock := sltime.Now(thread); clock != nil {
			var err error
			if t, err = clock(); err != nil {
				return nil, fmt.Errorf("time.now: %v", err)
			}
		}
		return starlark.MakeInt64(t.Unix()), nil
	})
	m.Freeze()
	return m
}

func module(name string, fns map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)) *starlarkstruct.Module {
	m := &starlarkstruct.Module{Name: name, Members: starlark.StringDict{}}
	for n, f := range fns {
		m.Members[n] = starlark.NewBuiltin(name+"."+n, f)
	}
	return m
}

// execModule: exec.run(cmd, args=[]) runs a program the extension lists in
// allowed_exec, as an argv without a shell, through the sandbox (its
// policy, isolation and limits), in the call's workspace.
func (p *Provider) execModule() *starlarkstruct.Module {
	return module("exec", map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
		"run": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var cmd string
			var argv *starlark.List
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "cmd", &cmd, "args?", &argv); err != nil {
				return nil, err
			}
			ctx, ext, ws, err := callState(thread, b.Name())
			if err != nil {
				return nil, err
			}
			if !slices.Contains(ext.AllowedExec, cmd) {
				return nil, fmt.Errorf("exec.run: %q is not in the allowed_exec of extension %s (%v)", cmd, ext.Name, ext.AllowedExec)
			}
			words := []string{cmd}
			if argv != nil {
				for i := range argv.Len() {
					s, ok := starlark.AsString(argv.Index(i))
					if !ok {
						return nil, fmt.Errorf("exec.run: args[%d] is a %s, not a string", i, argv.Index(i).Type())
					}
					words = append(words, s)
				}
			}
			if p.opts.Executor == nil {
				return nil, errors.New("exec.run: this daemon runs no commands (memory backend)")
			}
			res, err := p.opts.Executor.Run(ctx, sandbox.Request{Command: sandbox.CommandLine(words...), Workspace: ws})
			if err != nil {
				return nil, fmt.Errorf("exec.run: %s", errcode.Sentence(err))
			}
			return newRecord("result", starlark.StringDict{
				"stdout":    starlark.String(sandbox.WithTruncationNotice(res.Stdout, res.StdoutSize)),
				"stderr":    starlark.String(sandbox.WithTruncationNotice(res.Stderr, res.StderrSize)),
				"exit_code": starlark.MakeInt(res.ExitCode),
				"success":   starlark.Bool(res.ExitCode == 0 && !res.TimedOut),
			}), nil
		},
	})
}

// httpModule: http.get/post/put/patch/delete/options through the network
// door, with starlark-mcp's signatures: get, delete and options take
// (url, params, headers, auth), post, put and patch (url, params, headers,
// body, json_body, form_body, auth); delete and options take body,
// json_body and form_body after auth too. Each returns a response record.
func (p *Provider) httpModule() *starlarkstruct.Module {
	fns := map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){}
	for _, method := range []string{"get", "post", "put", "patch", "delete", "options"} {
		withBody := method == "post" || method == "put" || method == "patch"
		fns[method] = func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var url string
			var params, headers, auth, body, jsonBody, formBody starlark.Value = starlark.None, starlark.None, starlark.None, starlark.None, starlark.None, starlark.None
			var err error
			if withBody {
				err = starlark.UnpackArgs(b.Name(), args, kwargs, "url", &url, "params?", &params, "headers?", &headers,
					"body?", &body, "json_body?", &jsonBody, "form_body?", &formBody, "auth?", &auth)
			} else {
				err = starlark.UnpackArgs(b.Name(), args, kwargs, "url", &url, "params?", &params, "headers?", &headers,
					"auth?", &auth, "body?", &body, "json_body?", &jsonBody, "form_body?", &formBody)
			}
			if err != nil {
				return nil, err
			}
			ctx, _, _, err := callState(thread, b.Name())
			if err != nil {
				return nil, err
			}
			req, err := buildRequest(ctx, b.Name(), strings.ToUpper(method), url, params, headers, auth, body, jsonBody, formBody)
			if err != nil {
				return nil, err
			}
			res, err := p.opts.Net.Fetch(ctx, req)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", b.Name(), err)
			}
			hdr := starlark.NewDict(len(res.Header))
			for k := range res.Header {
				hdr.SetKey(starlark.String(strings.ToLower(k)), starlark.String(res.Header.Get(k)))
			}
			out := starlark.StringDict{
				"status":      starlark.MakeInt(res.Status),
				"status_code": starlark.MakeInt(res.Status),
				"headers":     hdr,
				"body":        starlark.String(res.Body),
				"truncated":   starlark.Bool(res.Truncated),
				"json":        starlark.None,
				"url":         starlark.String(res.URL),
			}
			if json.Valid(res.Body) && !res.Truncated {
				if v, err := FromJSON(res.Body); err == nil {
					out["json"] = v
				}
			}
			return newRecord("response", out), nil
		}
	}
	return module("http", fns)
}

// maxHTTPPairs bounds the entries of params, headers and form_body.
const maxHTTPPairs = 1000

// stringPairs reads a dict of params, headers or form_body: None is none;
// keys are strings, values strings or other scalars (their text, as
// starlark-mcp sends them).
func stringPairs(fn, what string, v starlark.Value) ([][2]string, error) {
	if v == starlark.None {
		return nil, nil
	}
	d, ok := v.(starlark.IterableMapping)
	if !ok {
		return nil, fmt.Errorf("%s: %s must be a dict, not a %s", fn, what, v.Type())
	}
	items := d.Items()
	if len(items) > maxHTTPPairs {
		return nil, fmt.Errorf("%s: %s has %d entries; the limit is %d", fn, what, len(items), maxHTTPPairs)
	}
	out := make([][2]string, 0, len(items))
	for _, kv := range items {
		k, ok := starlark.AsString(kv[0])
		if !ok {
			return nil, fmt.Errorf("%s: %s: a key is a %s, not a string", fn, what, kv[0].Type())
		}
		var val string
		switch x := kv[1].(type) {
		case starlark.String:
			val = string(x)
		case starlark.Int, starlark.Float, starlark.Bool:
			val = x.String()
		default:
			return nil, fmt.Errorf("%s: %s[%q] is a %s, not a string or number", fn, what, k, kv[1].Type())
		}
		out = append(out, [2]string{k, val})
	}
	return out, nil
}

// buildRequest makes the request of an http call: params added to the
// URL's query, headers set, auth a (user, password) pair sent as basic
// authentication, and at most one of json_body (sent as JSON), form_body
// (form-encoded) or body (a string, as it is).
func buildRequest(ctx context.Context, fn, method, rawURL string, params, headers, auth, body, jsonBody, formBody starlark.Value) (*http.Request, error) {
	u, err := neturl.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	query, err := stringPairs(fn, "params", params)
	if err != nil {
		return nil, err
	}
	if len(query) > 0 {
		q := u.Query()
		for _, kv := range query {
			q.Add(kv[0], kv[1])
		}
		u.RawQuery = q.Encode()
	}
	hdrs, err := stringPairs(fn, "headers", headers)
	if err != nil {
		return nil, err
	}
	set := 0
	for _, v := range []starlark.Value{body, jsonBody, formBody} {
		if v != starlark.None {
			set++
		}
	}
	if set > 1 {
		return nil, fmt.Errorf("%s: give one of body, json_body and form_body", fn)
	}
	var payload, contentType string
	switch {
	case jsonBody != starlark.None:
		j, err := ToJSON(jsonBody)
		if err != nil {
			return nil, fmt.Errorf("%s: json_body: %v", fn, err)
		}
		payload, contentType = string(j), "application/json"
	case formBody != starlark.None:
		form, err := stringPairs(fn, "form_body", formBody)
		if err != nil {
			return nil, err
		}
		vals := neturl.Values{}
		for _, kv := range form {
			vals.Add(kv[0], kv[1])
		}
		payload, contentType = vals.Encode(), "application/x-www-form-urlencoded"
	case body != starlark.None:
		s, ok := starlark.AsString(body)
		if !ok {
			return nil, fmt.Errorf("%s: body must be a string, not a %s", fn, body.Type())
		}
		payload = s
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), strings.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for _, kv := range hdrs {
		req.Header.Set(kv[0], kv[1])
	}
	if auth != starlark.None {
		var pair starlark.Indexable
		switch x := auth.(type) {
		case starlark.Tuple:
			pair = x
		case *starlark.List:
			pair = x
		}
		if pair == nil || pair.Len() != 2 {
			return nil, fmt.Errorf("%s: auth must be a (username, password) pair", fn)
		}
		user, ok1 := starlark.AsString(pair.Index(0))
		pass, ok2 := starlark.AsString(pair.Index(1))
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%s: auth must be a (username, password) pair of strings", fn)
		}
		req.SetBasicAuth(user, pass)
	}
	return req, nil
}

// fsModule: fs.read/write/list/exists in the call's workspace, through fsops.
func (p *Provider) fsModule() *starlarkstruct.Module {
	ws := func(thread *starlark.Thread, name string) (fsops.Workspace, error) {
		_, _, w, err := callState(thread, name)
		if err == nil && w == nil {
			err = fmt.Errorf("%s: this call has no workspace", name)
		}
		return w, err
	}
	wrap := func(name string, err error) error {
		return fmt.Errorf("%s: %s", name, errcode.Sentence(err))
	}
	return module("fs", map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
		"read": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var path string
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path); err != nil {
				return nil, err
			}
			w, err := ws(thread, b.Name())
			if err != nil {
				return nil, err
			}
			data, err := w.ReadFile(path)
			if err != nil {
				return nil, wrap(b.Name(), err)
			}
			return starlark.String(data), nil
		},
		"write": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var path, content string
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path, "content", &content); err != nil {
				return nil, err
			}
			w, err := ws(thread, b.Name())
			if err != nil {
				return nil, err
			}
			if err := w.WriteFile(path, []byte(content)); err != nil {
				return nil, wrap(b.Name(), err)
			}
			return starlark.None, nil
		},
		"list": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			path := "."
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path?", &path); err != nil {
				return nil, err
			}
			w, err := ws(thread, b.Name())
			if err != nil {
				return nil, err
			}
			infos, err := w.ReadDirTypes(path)
			if err != nil {
				return nil, wrap(b.Name(), err)
			}
			names := make([]starlark.Value, len(infos))
			for i, fi := range infos {
				names[i] = starlark.String(fi.Name)
			}
			return starlark.NewList(names), nil
		},
		"exists": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var path string
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path); err != nil {
				return nil, err
			}
			w, err := ws(thread, b.Name())
			if err != nil {
				return nil, err
			}
			ok, err := w.Exists(path)
			if err != nil {
				return nil, wrap(b.Name(), err)
			}
			return starlark.Bool(ok), nil
		},
	})
}

// envModule: env.get(name, default="") reads a variable the extension
// declares in env=[...] or the operator lists in EnvAllow, and never one
// holding a secret of the daemon's. A variable that is not set gives
// default; one that is set but may not be read, or holds a secret, is an
// error that says so (never default in its place: the extension would go
// on with a value it was not meant to have, silently).
func (p *Provider) envModule() *starlarkstruct.Module {
	return module("env", map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
		"get": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var name string
			var def starlark.Value = starlark.String("")
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "default?", &def); err != nil {
				return nil, err
			}
			_, ext, _, err := callState(thread, b.Name())
			if err != nil {
				return nil, err
			}
			v, set := p.opts.Getenv(name)
			if !set {
				return def, nil
			}
			if !slices.Contains(ext.Env, name) && !envAllowed(p.opts.EnvAllow, name) {
				return nil, fmt.Errorf("env.get: %s is set, but extension %s may not read it: list it in the extension's env=[...] or the operator's --extensions-env", name, ext.Name)
			}
			for _, s := range p.opts.Secrets.List() {
				if strings.Contains(v, s) {
					return nil, fmt.Errorf("env.get: %s holds a secret of the daemon's (its auth or operator token); it is never given to an extension", name)
				}
			}
			return starlark.String(v), nil
		},
	})
}

// envAllowed: name is one of allow, or has the prefix of a PREFIX_* there.
func envAllowed(allow []string, name string) bool {
	for _, a := range allow {
		if prefix, ok := strings.CutSuffix(a, "*"); ok && strings.HasPrefix(name, prefix) || a == name {
			return true
		}
	}
	return false
}

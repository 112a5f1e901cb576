package extensions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/opfile"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// TestOptions configure RunTests.
type TestOptions struct {
	Dir     string
	Run     string // a regexp selecting test functions (file.star:test_name or test_name)
	Verbose bool
	Out     io.Writer
	// Executor runs exec.run in tests (a software-mode executor over each
	// test's own directory when nil).
	Isolation sandbox.Mode
	Timeout   time.Duration // per test (30 s when 0)
}

// testFailure is one failed assertion.
type testFailure struct {
	pos string
	msg string
}

const localFailures = "agentbe.test.failures"

// errTestStopped ends a test at testing.fail, whose failure is recorded
// already.
var errTestStopped = errors.New("the test called testing.fail")

// testingModule is the `testing` module of *_test.star files.
func testingModule() *starlarkstruct.Module {
	fail := func(thread *starlark.Thread, format string, args ...any) {
		fs, _ := thread.Local(localFailures).(*[]testFailure)
		pos := ""
		if fr := thread.CallFrame(1); fr.Pos.IsValid() {
			pos = fmt.Sprintf("%s:%d", filepath.Base(fr.Pos.Filename()), fr.Pos.Line)
		}
		*fs = append(*fs, testFailure{pos: pos, msg: fmt.Sprintf(format, args...)})
	}
	suffix := func(msg string) string {
		if msg == "" {
			return ""
		}
		return ": " + msg
	}
	return module("testing", map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
		"eq": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var a, c starlark.Value
			msg := ""
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "a", &a, "b", &c, "msg?", &msg); err != nil {
				return nil, err
			}
			if ok, err := starlark.Equal(a, c); err != nil || !ok {
				fail(thread, "eq: %s != %s%s", a.String(), c.String(), suffix(msg))
			}
			return starlark.None, nil
		},
		"ne": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var a, c starlark.Value
			msg := ""
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "a", &a, "b", &c, "msg?", &msg); err != nil {
				return nil, err
			}
			if ok, err := starlark.Equal(a, c); err != nil || ok {
				fail(thread, "ne: both are %s%s", a.String(), suffix(msg))
			}
			return starlark.None, nil
		},
		"is_true": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var v starlark.Value
			msg := ""
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "v", &v, "msg?", &msg); err != nil {
				return nil, err
			}
			if !v.Truth() {
				fail(thread, "is_true: %s is false%s", v.String(), suffix(msg))
			}
			return starlark.None, nil
		},
		"is_false": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var v starlark.Value
			msg := ""
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "v", &v, "msg?", &msg); err != nil {
				return nil, err
			}
			if v.Truth() {
				fail(thread, "is_false: %s is true%s", v.String(), suffix(msg))
			}
			return starlark.None, nil
		},
		"contains": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var container, item starlark.Value
			msg := ""
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "container", &container, "item", &item, "msg?", &msg); err != nil {
				return nil, err
			}
			found := false
			switch c := container.(type) {
			case starlark.String:
				s, ok := starlark.AsString(item)
				found = ok && strings.Contains(string(c), s)
			case starlark.Mapping:
				_, found, _ = c.Get(item)
			case starlark.Iterable:
				it := c.Iterate()
				var x starlark.Value
				for it.Next(&x) {
					if eq, _ := starlark.Equal(x, item); eq {
						found = true
						break
					}
				}
				it.Done()
			}
			if !found {
				fail(thread, "contains: %s not in %s%s", item.String(), container.String(), suffix(msg))
			}
			return starlark.None, nil
		},
		"fail": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			msg := ""
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "msg", &msg); err != nil {
				return nil, err
			}
			fail(thread, "fail: %s", cutText(msg, MaxOutputBytes))
			return nil, errTestStopped
		},
		"fails": func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if len(args) < 1 {
				return nil, fmt.Errorf("%s: want fails(fn, args...)", b.Name())
			}
			fn, ok := args[0].(starlark.Callable)
			if !ok {
				return nil, fmt.Errorf("%s: %s is not callable", b.Name(), args[0].Type())
			}
			_, err := starlark.Call(thread, fn, args[1:], kwargs)
			if err == nil {
				fail(thread, "fails: %s(...) did not fail", fn.Name())
				return starlark.None, nil
			}
			return starlark.String(evalMessage(err)), nil
		},
	})
}

// RunTests runs every test_* function of every *_test.star file in the
// directory, each in a fresh thread with a fresh workspace, and reports like
// go test. It returns whether everything passed.
func RunTests(ctx context.Context, o TestOptions) (bool, error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	var filter *regexp.Regexp
	if o.Run != "" {
		var err error
		if filter, err = regexp.Compile(o.Run); err != nil {
			return false, fmt.Errorf("-run %q: %v", o.Run, err)
		}
	}
	p, err := newProvider(Options{Dir: o.Dir})
	if err != nil {
		return false, err
	}
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return false, err
	}
	var files []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "_test.star") {
			files = append(files, e.Name())
		}
	}
	sort.Strings(files)
	ok, ran := true, 0
	start := time.Now()
	for _, f := range files {
		// The extension a test file goes with (notes_test.star → notes.star)
		// gives exec and env their allowances.
		ext := &Extension{File: f, Name: strings.TrimSuffix(f, "_test.star")}
		if loaded, err := p.loadFile(strings.TrimSuffix(f, "_test.star") + ".star"); err == nil {
			ext = loaded
		}
		// Through links as the extensions are (resolve): a ConfigMap's,
		// inside the directory, are followed; one leading out, or to what
		// is not a regular file, fails the run naming where it leads.
		real, _, err := resolve(p.dir, f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a link to nothing: a key dropped from the ConfigMap
		}
		if err != nil {
			fmt.Fprintf(o.Out, "--- FAIL: %s\n    %v\n", f, err)
			ok = false
			continue
		}
		src, err := opfile.ReadRegular(real, MaxFileBytes)
		if err != nil {
			return false, err
		}
		pre := p.predeclared()
		pre["testing"] = testingModule()
		thread := p.newThread(f, nil)
		thread.SetMaxExecutionSteps(DefaultMaxSteps)
		globals, err := starlark.ExecFileOptions(fileOptions, thread, filepath.Join(p.dir, f), src, pre)
		if err != nil {
			fmt.Fprintf(o.Out, "--- FAIL: %s\n    %v\n", f, loadError(f, err))
			ok = false
			continue
		}
		var names []string
		for n, v := range globals {
			if _, isFn := v.(*starlark.Function); isFn && strings.HasPrefix(n, "test_") {
				names = append(names, n)
			}
		}
		sort.Slice(names, func(i, j int) bool {
			return globals[names[i]].(*starlark.Function).Position().Line < globals[names[j]].(*starlark.Function).Position().Line
		})
		for _, n := range names {
			if filter != nil && !filter.MatchString(n) && !filter.MatchString(f+":"+n) {
				continue
			}
			ran++
			passed, out := runTest(ctx, p, o, f, ext, globals[n].(*starlark.Function))
			if !passed {
				ok = false
			}
			if !passed || o.Verbose {
				fmt.Fprint(o.Out, out)
			}
		}
	}
	status := "ok"
	if !ok {
		status = "FAIL"
	}
	fmt.Fprintf(o.Out, "%s\t%s\t%d tests\t%.3fs\n", status, o.Dir, ran, time.Since(start).Seconds())
	return ok, nil
}

func runTest(ctx context.Context, p *Provider, o TestOptions, file string, ext *Extension, fn *starlark.Function) (bool, string) {
	began := time.Now()
	dir, err := os.MkdirTemp("", "agentbe-ext-test-")
	if err != nil {
		return false, fmt.Sprintf("--- FAIL: %s:%s\n    %v\n", file, fn.Name(), err)
	}
	defer os.RemoveAll(dir)
	ws, err := fsops.NewDir(dir, fsops.Options{})
	if err != nil {
		return false, fmt.Sprintf("--- FAIL: %s:%s\n    %v\n", file, fn.Name(), err)
	}
	defer ws.Close()
	mode := o.Isolation
	if mode == "" {
		mode = sandbox.ModeSoftware
	}
	exe, err := sandbox.New(sandbox.Config{Mode: mode, WorkspaceRoot: ws.Root()})
	if err != nil {
		return false, fmt.Sprintf("--- FAIL: %s:%s\n    %v\n", file, fn.Name(), err)
	}
	defer exe.Close()
	p.opts.Executor = exe
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var failures []testFailure
	thread := p.newThread(file, ext)
	thread.SetLocal(localCtx, ctx)
	thread.SetLocal(localExt, ext)
	thread.SetLocal(localWS, ws)
	thread.SetLocal(localFailures, &failures)
	thread.SetMaxExecutionSteps(DefaultMaxSteps)
	stop := context.AfterFunc(ctx, func() { thread.Cancel("the test's time ran out") })
	defer stop()
	_, err = starlark.Call(thread, fn, nil, nil)
	if err != nil && !errors.Is(err, errTestStopped) {
		failures = append(failures, testFailure{msg: evalMessage(err)})
	}
	elapsed := time.Since(began).Seconds()
	var b strings.Builder
	if len(failures) == 0 {
		fmt.Fprintf(&b, "--- PASS: %s:%s (%.2fs)\n", file, fn.Name(), elapsed)
		return true, b.String()
	}
	fmt.Fprintf(&b, "--- FAIL: %s:%s (%.2fs)\n", file, fn.Name(), elapsed)
	for _, f := range failures {
		if f.pos != "" {
			fmt.Fprintf(&b, "    %s: %s\n", f.pos, f.msg)
		} else {
			fmt.Fprintf(&b, "    %s\n", f.msg)
		}
	}
	return false, b.String()
}

// Check loads every extension of the directory and returns every error,
// with file and line, without serving anything.
func Check(dir string) ([]error, int, error) {
	p, err := newProvider(Options{Dir: dir})
	if err != nil {
		return nil, 0, err
	}
	names, err := p.list()
	if err != nil {
		return nil, 0, err
	}
	var errs []error
	tools := 0
	seen := map[string]string{}
	for _, f := range names {
		if _, _, err := resolve(p.dir, f); errors.Is(err, fs.ErrNotExist) {
			continue // a link to nothing is no file, as for the provider
		}
		ext, err := p.loadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := seen[ext.Name]; dup {
			errs = append(errs, &LoadError{File: f, Msg: fmt.Sprintf("extension name %q is also the name of %s; tool names would collide", ext.Name, other)})
			continue
		}
		seen[ext.Name] = f
		tools += len(ext.Tools)
	}
	return errs, tools, nil
}

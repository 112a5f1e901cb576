package registry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func echo(name string) Tool {
	return Tool{Name: name, Description: "echoes", InputSchema: map[string]any{"type": "object"},
		Handler: func(_ context.Context, c Call) *mcp.CallToolResult { return text(name + ":" + string(c.Args)) }}
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res == nil || len(res.Content) != 1 {
		t.Fatalf("result %+v: want one content block", res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func TestNames(t *testing.T) {
	for _, tt := range []struct {
		name string
		want string // "" = valid, else part of the error
	}{
		{"read_text_file", ""},
		{"server__tool", ""},
		{"a.b-c_D9", ""},
		{strings.Repeat("x", 64), ""},
		{"", "empty"},
		{strings.Repeat("x", 65), "65 characters long; the limit is 64"},
		{"has space", "only letters, digits"},
		{"slash/name", "only letters, digits"},
		{"émoji", "only letters, digits"},
		{"new\nline", "only letters, digits"},
	} {
		err := ValidName(tt.name)
		if tt.want == "" && err != nil {
			t.Errorf("ValidName(%q) = %v, want nil", tt.name, err)
		}
		if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("ValidName(%q) = %v, want an error containing %q", tt.name, err, tt.want)
		}
		r := New(Options{})
		if err := r.Set("p", []Tool{echo(tt.name)}); (err == nil) != (tt.want == "") {
			t.Errorf("Set with tool %q: %v", tt.name, err)
		}
	}
}

func TestSetValidates(t *testing.T) {
	r := New(Options{})
	noHandler := echo("b")
	noHandler.Handler = nil
	for _, tt := range []struct {
		provider string
		tools    []Tool
		want     string
	}{
		{"", []Tool{echo("a")}, "provider name is empty"},
		{"p", []Tool{echo("a"), echo("a")}, `tool "a" is listed twice`},
		{"p", []Tool{echo("a"), noHandler}, `tool "b" has no handler`},
	} {
		if err := r.Set(tt.provider, tt.tools); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Set(%q): %v, want %q", tt.provider, err, tt.want)
		}
	}
	if n := len(r.List()); n != 0 {
		t.Fatalf("a refused Set left %d tools", n)
	}
}

func TestCollisionNamesBothProviders(t *testing.T) {
	r := New(Options{})
	if err := r.Set("workspace", []Tool{echo("read_text_file"), echo("exec")}); err != nil {
		t.Fatal(err)
	}
	err := r.Set("upstream", []Tool{echo("other"), echo("exec")})
	var ce *CollisionError
	if !errors.As(err, &ce) || ce.Tool != "exec" || ce.Provider != "upstream" || ce.OtherProvider != "workspace" {
		t.Fatalf("Set = %v, want a collision on exec naming upstream and workspace", err)
	}
	if !strings.Contains(err.Error(), `"upstream"`) || !strings.Contains(err.Error(), `"workspace"`) {
		t.Fatalf("error %q does not name both providers", err)
	}
	// Nothing of the refused set got in.
	if _, ok := r.Lookup("other"); ok {
		t.Fatal("a refused Set added a tool")
	}
	// A provider may re-set its own names.
	if err := r.Set("workspace", []Tool{echo("exec")}); err != nil {
		t.Fatalf("re-setting a provider's own tool: %v", err)
	}
	if _, ok := r.Lookup("read_text_file"); ok {
		t.Fatal("Set did not replace the provider's whole set")
	}
}

func TestListSortedAndSubscribers(t *testing.T) {
	r := New(Options{})
	var changes atomic.Int32
	cancel := r.Subscribe(func() { changes.Add(1) })
	if err := r.Set("b", []Tool{echo("zeta"), echo("alpha")}); err != nil {
		t.Fatal(err)
	}
	if err := r.Set("a", []Tool{echo("mid")}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range r.List() {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "alpha,mid,zeta" {
		t.Fatalf("List = %v, want sorted by name", names)
	}
	if err := r.Set("b", nil); err != nil { // the provider goes away
		t.Fatal(err)
	}
	if got := changes.Load(); got != 3 {
		t.Fatalf("%d change notifications, want 3", got)
	}
	if err := r.Set("b", nil); err != nil { // nothing changes: no notification
		t.Fatal(err)
	}
	cancel()
	if err := r.Set("a", nil); err != nil {
		t.Fatal(err)
	}
	if got := changes.Load(); got != 3 {
		t.Fatalf("%d notifications after a no-op and a cancelled subscription, want 3", got)
	}
	ps := r.Providers()
	if len(ps) != 2 || ps[0].Name != "b" || ps[0].Tools != 0 || ps[1].Name != "a" || ps[0].State != "ready" {
		t.Fatalf("Providers = %+v", ps)
	}
	r.SetState("a", "failed", "exited with status 1")
	if p := r.Providers()[1]; p.State != "failed" || p.Detail != "exited with status 1" {
		t.Fatalf("after SetState: %+v", p)
	}
}

func TestCall(t *testing.T) {
	var recs []Record
	var mu sync.Mutex
	r := New(Options{Observe: func(rec Record) { mu.Lock(); recs = append(recs, rec); mu.Unlock() }})
	if err := r.Set("p", []Tool{echo("e")}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Call(context.Background(), "e", Call{Args: json.RawMessage(`{"x":1}`), Face: "rest", Remote: "127.0.0.1:1"})
	if err != nil || resultText(t, res) != `e:{"x":1}` {
		t.Fatalf("Call = %v, %v", res, err)
	}
	_, err = r.Call(context.Background(), "nope", Call{Face: "rest"})
	var ue *UnknownToolError
	if !errors.As(err, &ue) || ue.Name != "nope" {
		t.Fatalf("unknown tool: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(recs) != 2 || recs[0].Outcome != "ok" || recs[0].Provider != "p" || recs[0].BytesIn != 7 || recs[0].BytesOut != 9 ||
		recs[0].Face != "rest" || recs[1].Outcome != "unknown" {
		t.Fatalf("records %+v", recs)
	}
}

func TestTimeoutIsOneResultAndKeepsTheSlot(t *testing.T) {
	release := make(chan struct{})
	var recs []Record
	var mu sync.Mutex
	r := New(Options{MaxConcurrent: 1, QueueWait: 50 * time.Millisecond,
		Observe: func(rec Record) { mu.Lock(); recs = append(recs, rec); mu.Unlock() }})
	slow := Tool{Name: "slow", Timeout: 50 * time.Millisecond, Handler: func(ctx context.Context, _ Call) *mcp.CallToolResult {
		<-ctx.Done()
		<-release // a handler that is slow to notice
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "handler's own words: " + ctx.Err().Error()}}}
	}}
	if err := r.Set("p", []Tool{slow, echo("e")}); err != nil {
		t.Fatal(err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := r.Call(context.Background(), "slow", Call{})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// Until the slow handler returns, it holds the only slot.
	time.Sleep(100 * time.Millisecond)
	if _, err := r.Call(context.Background(), "e", Call{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("a call while the slot is held: %v, want ErrBusy", err)
	}
	close(release)
	res := <-done
	if !res.IsError || resultText(t, res) != "Tool slow timed out after 50ms and was cancelled" {
		t.Fatalf("timed-out call = %+v; want the registry's timeout result", res)
	}
	if res, err := r.Call(context.Background(), "e", Call{}); err != nil || resultText(t, res) != "e:" {
		t.Fatalf("after the slow call: %+v, %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	outcomes := []string{}
	for _, rec := range recs {
		outcomes = append(outcomes, rec.Tool+":"+rec.Outcome)
	}
	if got := strings.Join(outcomes, ","); got != "e:busy,slow:timeout,e:ok" {
		t.Fatalf("outcomes %s", got)
	}
}

// TestDetachedCallKeepsItsSlot: a handler that answers at its deadline
// while its work goes on (Call.Detach) keeps the call's slot until the work
// releases it: a call meanwhile is refused busy, the provider shows as
// degraded with one runaway call, and the answer says the work still runs;
// the release frees the slot and the provider is ready again. A release is
// idempotent; a Detach after the handler returned holds nothing.
func TestDetachedCallKeepsItsSlot(t *testing.T) {
	r := New(Options{MaxConcurrent: 1, QueueWait: 20 * time.Millisecond})
	var release func()
	var late func() (release func())
	workEnds := make(chan struct{})
	workDone := make(chan struct{})
	stuck := Tool{Name: "stuck", Timeout: 30 * time.Millisecond, Handler: func(ctx context.Context, c Call) *mcp.CallToolResult {
		release = c.Detach()
		go func() { // the work that outlives the answer
			defer close(workDone)
			<-workEnds
			release()
			release()
		}()
		<-ctx.Done()
		late = c.Detach // called after the handler returned
		return errorResult("stopped waiting")
	}}
	if err := r.Set("p", []Tool{stuck, echo("e")}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Call(context.Background(), "stuck", Call{})
	if err != nil || !res.IsError || !strings.Contains(resultText(t, res), "timed out after 30ms and was cancelled; a step it cannot interrupt is still running") {
		t.Fatalf("the detached call's answer: %+v, %v", res, err)
	}
	if _, err := r.Call(context.Background(), "e", Call{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("a call while the detached work holds the only slot: %v, want ErrBusy", err)
	}
	if ps := r.Providers(); len(ps) != 1 || ps[0].State != "degraded" || ps[0].Runaway != 1 || !strings.Contains(ps[0].Detail, "1 calls answered at their deadline") {
		t.Fatalf("providers while the work runs: %+v", ps)
	}
	close(workEnds)
	<-workDone
	if ps := r.Providers(); ps[0].State != "ready" || ps[0].Runaway != 0 || ps[0].Detail != "" {
		t.Fatalf("providers after the work ended: %+v", ps)
	}
	late()()
	for range 2 { // the slot is free, and stays so
		if res, err := r.Call(context.Background(), "e", Call{}); err != nil || resultText(t, res) != "e:" {
			t.Fatalf("after the release: %+v, %v", res, err)
		}
	}
	// Outside a registry call, Detach holds nothing.
	Call{}.Detach()()
}

// TestResultAtTheDeadlineStands: a handler that succeeds although its
// deadline passed keeps its result.
func TestResultAtTheDeadlineStands(t *testing.T) {
	r := New(Options{})
	if err := r.Set("p", []Tool{{Name: "late", Timeout: time.Millisecond, Handler: func(ctx context.Context, _ Call) *mcp.CallToolResult {
		<-ctx.Done()
		return text("finished anyway")
	}}}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Call(context.Background(), "late", Call{})
	if err != nil || res.IsError || resultText(t, res) != "finished anyway" {
		t.Fatalf("Call = %+v, %v", res, err)
	}
}

func TestCallerDeadlineLowersTheTimeout(t *testing.T) {
	r := New(Options{DefaultTimeout: time.Hour})
	if err := r.Set("p", []Tool{{Name: "wait", Handler: func(ctx context.Context, _ Call) *mcp.CallToolResult {
		<-ctx.Done()
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "stopped: " + ctx.Err().Error()}}}
	}}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	res, err := r.Call(ctx, "wait", Call{})
	if err != nil || !res.IsError {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the caller's deadline did not bound the call (took %s)", d)
	}
}

func TestSaturationRefusesWithoutHanging(t *testing.T) {
	const slots = 3
	r := New(Options{MaxConcurrent: slots, QueueWait: 20 * time.Millisecond})
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(slots)
	if err := r.Set("p", []Tool{{Name: "hold", Handler: func(context.Context, Call) *mcp.CallToolResult {
		started.Done()
		<-release
		return text("done")
	}}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Call(context.Background(), "hold", Call{}); err != nil {
				t.Errorf("a call within the cap: %v", err)
			}
		}()
	}
	started.Wait()
	for range 5 {
		if _, err := r.Call(context.Background(), "hold", Call{}); !errors.Is(err, ErrBusy) {
			t.Fatalf("a call past the cap: %v, want ErrBusy", err)
		}
	}
	close(release)
	wg.Wait()
}

func TestPanicIsAnErrorResult(t *testing.T) {
	r := New(Options{})
	if err := r.Set("p", []Tool{
		{Name: "boom", Handler: func(context.Context, Call) *mcp.CallToolResult { panic("kaboom") }},
		{Name: "nil", Handler: func(context.Context, Call) *mcp.CallToolResult { return nil }},
	}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"boom", "nil"} {
		res, err := r.Call(context.Background(), name, Call{})
		if err != nil || !res.IsError || !strings.Contains(resultText(t, res), "Tool "+name) {
			t.Fatalf("%s: %+v, %v", name, res, err)
		}
	}
	// The slot of the panicking call came back.
	for range DefaultMaxConcurrent + 1 {
		if _, err := r.Call(context.Background(), "boom", Call{}); err != nil {
			t.Fatalf("after panics: %v", err)
		}
	}
}

func TestConcurrentSetAndCall(t *testing.T) {
	r := New(Options{MaxConcurrent: 64})
	if err := r.Set("p", []Tool{echo("a")}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tools := []Tool{echo("a")}
			if i%2 == 0 {
				tools = append(tools, echo("b"))
			}
			if err := r.Set("p", tools); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 2000 {
		// Every set has "a", and Set swaps sets whole: "a" never goes missing.
		if _, err := r.Call(context.Background(), "a", Call{}); err != nil {
			t.Fatalf("Call: %v", err)
		}
		_ = r.List()
	}
	close(stop)
	wg.Wait()
}

func BenchmarkCall(b *testing.B) {
	r := New(Options{})
	if err := r.Set("p", []Tool{echo("e")}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Call(ctx, "e", Call{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestResultCode(t *testing.T) {
	for _, tc := range []struct {
		res  *mcp.CallToolResult
		want errcode.Code
	}{
		{nil, ""},
		{errorResult("x"), ""},
		{WithCode(errorResult("x"), errcode.PathEscapeAttempt), errcode.PathEscapeAttempt},
		{WithCode(&mcp.CallToolResult{Meta: mcp.Meta{"other": 1}}, errcode.InvalidArgument), errcode.InvalidArgument},
	} {
		if got := Code(tc.res); got != tc.want {
			t.Errorf("Code(%+v) = %q, want %q", tc.res, got, tc.want)
		}
	}
}

// TestCallerRestrictions: a read-only caller reaches only tools annotated
// readOnlyHint, a caller without exec no tool that RunsCommands (nor does a
// read-only one), the refusal names the token and the tool, and the record
// says "denied" and who called.
func TestCallerRestrictions(t *testing.T) {
	var recs []Record
	r := New(Options{Observe: func(rec Record) { recs = append(recs, rec) }})
	ran := map[string]int{}
	mk := func(name string, ro, cmds bool) Tool {
		return Tool{Name: name, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ro}, RunsCommands: cmds,
			Handler: func(ctx context.Context, call Call) *mcp.CallToolResult {
				ran[name]++
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
			}}
	}
	if err := r.Set("p", []Tool{mk("read", true, false), mk("write", false, false), mk("run", false, true)}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		call    Call
		allowed map[string]bool
	}{
		{Call{}, map[string]bool{"read": true, "write": true, "run": true}},
		{Call{Caller: "ro", ReadOnly: true}, map[string]bool{"read": true}},
		{Call{Caller: "noexec", NoExec: true}, map[string]bool{"read": true, "write": true}},
	}
	for _, c := range cases {
		for _, name := range []string{"read", "write", "run"} {
			before := ran[name]
			recs = recs[:0]
			res, err := r.Call(context.Background(), name, c.call)
			if err != nil {
				t.Fatal(err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if c.allowed[name] {
				if res.IsError || ran[name] != before+1 {
					t.Errorf("%+v calling %s: refused: %s", c.call, name, text)
				}
				continue
			}
			if !res.IsError || ran[name] != before || !strings.HasPrefix(text, "Permission denied: token \""+c.call.Caller+"\"") || !strings.Contains(text, name) {
				t.Errorf("%+v calling %s: ran %d, result %q", c.call, name, ran[name]-before, text)
			}
			if len(recs) != 1 || recs[0].Outcome != "denied" || recs[0].Caller != c.call.Caller {
				t.Errorf("%+v calling %s: records %+v", c.call, name, recs)
			}
		}
	}
}

// TestBoundCallerRefusedWholeRoot: a tool over the whole root is refused
// to a caller bound to a scope, and served to one that is not. (That a
// read-only caller's tool cannot write, whatever its hint, is its
// workspace's doing: internal/admit TestReadOnlyCallerGetsReadOnlyWorkspace.)
func TestBoundCallerRefusedWholeRoot(t *testing.T) {
	ws, err := fsops.NewDir(t.TempDir(), fsops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	r := New(Options{})
	whole := Tool{Name: "whole", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}, WholeRoot: true,
		Handler: func(ctx context.Context, call Call) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}
		}}
	if err := r.Set("p", []Tool{whole}); err != nil {
		t.Fatal(err)
	}
	res, _ := r.Call(context.Background(), "whole", Call{Workspace: ws, Caller: "alice", Bound: true})
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "works over the whole root") {
		t.Errorf("a bound caller reached a whole-root tool: %+v", res)
	}
	if res, _ := r.Call(context.Background(), "whole", Call{Workspace: ws, Caller: "rootwide"}); res.IsError {
		t.Errorf("an unbound token was refused a whole-root tool")
	}
}

// TestBareNames: a tool is callable by its Bare while exactly one tool
// claims it; a name a tool is called by wins over any Bare; a Bare two
// tools claim calls neither and names both; lists keep the full names.
func TestBareNames(t *testing.T) {
	var recs []Record
	r := New(Options{Observe: func(rec Record) { recs = append(recs, rec) }})
	bare := func(name, b string) Tool { t := echo(name); t.Bare = b; return t }
	if err := r.Set("a", []Tool{bare("a__read_file", "read_file"), bare("a__only_a", "only_a"), bare("a__exec", "exec")}); err != nil {
		t.Fatal(err)
	}
	if err := r.Set("workspace", []Tool{echo("exec")}); err != nil {
		t.Fatal(err)
	}
	call := func(name string) (string, error) {
		res, err := r.Call(context.Background(), name, Call{Face: "rest", Args: json.RawMessage(`{"x":1}`)})
		if err != nil {
			return "", err
		}
		return resultText(t, res), nil
	}
	if got, err := call("read_file"); err != nil || got != `a__read_file:{"x":1}` {
		t.Errorf("read_file with one server: %q %v", got, err)
	}
	if recs[len(recs)-1].Tool != "a__read_file" || recs[len(recs)-1].Provider != "a" || recs[len(recs)-1].Outcome != "ok" {
		t.Errorf("record of a bare call: %+v; want the tool that ran", recs[len(recs)-1])
	}
	if got, err := call("exec"); err != nil || !strings.HasPrefix(got, "exec:") {
		t.Errorf("exec, a name a tool is called by: %q %v; want the workspace's tool", got, err)
	}
	if err := r.Set("b", []Tool{bare("b__read_file", "read_file")}); err != nil {
		t.Fatal(err)
	}
	_, err := call("read_file")
	var amb *AmbiguousToolError
	if !errors.As(err, &amb) || strings.Join(amb.Tools, ",") != "a__read_file,b__read_file" ||
		!strings.Contains(err.Error(), `"read_file" is ambiguous: a__read_file, b__read_file`) {
		t.Fatalf("read_file with two servers: %v; want AmbiguousToolError naming both", err)
	}
	if rec := recs[len(recs)-1]; rec.Outcome != "ambiguous" || rec.Tool != "read_file" {
		t.Errorf("record of an ambiguous call: %+v", rec)
	}
	if _, err := r.Resolve("read_file"); !errors.As(err, &amb) {
		t.Errorf("Resolve(read_file) = %v; want ambiguous", err)
	}
	if got, err := call("only_a"); err != nil || !strings.HasPrefix(got, "a__only_a:") {
		t.Errorf("only_a: %q %v", got, err)
	}
	var unknown *UnknownToolError
	if _, err := call("nothing"); !errors.As(err, &unknown) {
		t.Errorf("nothing: %v; want UnknownToolError", err)
	}
	for _, tool := range r.List() {
		if tool.Name == "read_file" || tool.Name == "only_a" {
			t.Errorf("List names a bare name: %s", tool.Name)
		}
	}
	// b goes: read_file is a's alone again.
	if err := r.Set("b", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := call("read_file"); err != nil || !strings.HasPrefix(got, "a__read_file:") {
		t.Errorf("read_file after b left: %q %v", got, err)
	}
	if err := r.Set("c", []Tool{bare("c__x", "bad name")}); err == nil || !strings.Contains(err.Error(), "bare name") {
		t.Errorf("an invalid bare name: %v", err)
	}
}

// TestBeforeChange: the hook runs before each call of a tool that can
// change the workspace, with the call, and not for a read-only tool; its
// error stops the handler; a panic in it is an error result; nil removes it.
func TestBeforeChange(t *testing.T) {
	r := New(Options{})
	var ran atomic.Int32
	writer := echo("writer")
	writer.Handler = func(_ context.Context, c Call) *mcp.CallToolResult { ran.Add(1); return text("wrote") }
	reader := echo("reader")
	reader.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: true}
	if err := r.Set("p", []Tool{writer, reader}); err != nil {
		t.Fatal(err)
	}
	var seen []string
	var fail error
	r.SetBeforeChange(func(ctx context.Context, tool Tool, call Call) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the hook's context has no deadline")
		}
		seen = append(seen, tool.Name+" "+call.Scope)
		if fail != nil {
			panic(fail)
		}
		return nil
	})
	ctx := context.Background()
	if res, err := r.Call(ctx, "writer", Call{Scope: "s"}); err != nil || res.IsError {
		t.Fatalf("writer: %v %+v", err, res)
	}
	if res, err := r.Call(ctx, "reader", Call{Scope: "s"}); err != nil || res.IsError {
		t.Fatalf("reader: %v %+v", err, res)
	}
	if strings.Join(seen, ",") != "writer s" || ran.Load() != 1 {
		t.Fatalf("hook saw %v, handler ran %d times", seen, ran.Load())
	}

	r.SetBeforeChange(func(context.Context, Tool, Call) error { return errors.New("the checkpoint store is full") })
	res, _ := r.Call(ctx, "writer", Call{})
	if !res.IsError || resultText(t, res) != "Tool writer did not run: the checkpoint store is full" || ran.Load() != 1 {
		t.Fatalf("a failing hook: %+v, handler ran %d times", res, ran.Load())
	}

	fail = errors.New("boom")
	r.SetBeforeChange(func(context.Context, Tool, Call) error { panic(fail) })
	res, _ = r.Call(ctx, "writer", Call{})
	if !res.IsError || ran.Load() != 1 {
		t.Fatalf("a panicking hook: %+v", res)
	}

	r.SetBeforeChange(nil)
	if res, _ := r.Call(ctx, "writer", Call{}); res.IsError || ran.Load() != 2 {
		t.Fatalf("without a hook: %+v", res)
	}
}

// TestSetRefusesBadInputSchemas: a schema that is not a JSON object of type
// "object" (which the MCP face's SDK panics on) is refused by Set, in each
// form a provider may give it; a missing one is ValidInputSchema's error.
func TestSetRefusesBadInputSchemas(t *testing.T) {
	r := New(Options{})
	for _, schema := range []any{
		map[string]any{"type": "string"}, map[string]any{}, []any{1}, "object",
		json.RawMessage(`{"type":["object"]}`), json.RawMessage(`null`), json.RawMessage(`[`),
	} {
		tl := echo("a")
		tl.InputSchema = schema
		if err := r.Set("p", []Tool{tl}); err == nil || !strings.Contains(err.Error(), "input schema") {
			t.Errorf("schema %v: Set answered %v", schema, err)
		}
	}
	if err := ValidInputSchema(nil); err == nil {
		t.Error("a missing schema is valid")
	}
	for _, schema := range []any{map[string]any{"type": "object"}, json.RawMessage(` {"type" : "object","properties":{}}`)} {
		if err := ValidInputSchema(schema); err != nil {
			t.Errorf("schema %v: %v", schema, err)
		}
	}
}

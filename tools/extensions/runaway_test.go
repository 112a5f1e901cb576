package extensions

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// runaway's tools build values one step can take long over.
const runaway = `
def deep(n):
    x = []
    for i in range(n):
        x = [x]
    return x

def wide(n):
    x = [1]
    for i in range(n):
        x = [x, x]
    return x

# Built as the file loads, so that a call's deadline passes inside the
# step below, not while the list is built.
DEEP = deep(40000)

def percent(p):
    # "%" is not one of the bounded conversions: formatting a list nested
    # n deep is one step whose time grows with n*n (about a second at
    # 4*10^4, seconds at 10^5), which only the deadline answers.
    return "%s" % (DEEP,)

def quick(p):
    return "quick"

def describe_extension():
    return Extension(name = "run", tools = [
        Tool(name = "percent", handler = percent),
        Tool(name = "quick", handler = quick),
    ])
`

// TestRunawayStepAnswersAtDeadline: a call stuck inside one Starlark step
// (a built-in that does not look at cancellation) is answered at its
// deadline; until the step really ends it keeps its slot (a second call of
// the concurrency-1 extension does not start) and the extension shows as
// degraded, in its Health and in the registry's providers; then the slot
// frees and nothing is left running (goleak, TestMain).
func TestRunawayStepAnswersAtDeadline(t *testing.T) {
	const deadline = 100 * time.Millisecond
	f := start(t, map[string]string{"run.star": runaway}, func(o *Options) {
		o.MaxConcurrent = 1
		o.Registry = registry.New(registry.Options{MaxConcurrent: 4, DefaultTimeout: deadline})
	})
	begin := time.Now()
	txt, isErr, code := f.call(t, "run__percent", `{}`)
	took := time.Since(begin)
	if took > 10*deadline {
		t.Errorf("the call answered after %s; its deadline was %s", took, deadline)
	}
	if !isErr || !strings.Contains(txt, "timed out after 100ms") || !strings.Contains(txt, "still running") {
		t.Errorf("answer: %q isError=%v code=%s", txt, isErr, code)
	}
	// The step is still running (it takes seconds): the extension is
	// degraded and its one slot is taken.
	h := f.p.Health()
	if len(h) != 1 || h[0].State != "degraded" || h[0].Runaway != 1 {
		t.Errorf("health while the step runs: %+v", h)
	}
	if ps := providerInfo(f.reg, "extension:run.star"); ps.State != "degraded" || ps.Runaway != 1 {
		t.Errorf("registry provider while the step runs: %+v", ps)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if txt, isErr, _ := f.callCtx(t, ctx, "run__quick", `{}`); !isErr || txt == "quick" {
		t.Errorf("a second call started while the runaway step held the extension's only slot: %q", txt)
	}
	// A hang guard: the step takes about a second, ten under -race, more
	// on a loaded machine.
	for end := time.Now().Add(3 * time.Minute); f.p.Health()[0].State != "ready"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the runaway step did not end")
		}
	}
	if h := f.p.Health()[0]; h.Runaway != 0 {
		t.Errorf("health after the step ended: %+v", h)
	}
	if ps := providerInfo(f.reg, "extension:run.star"); ps.State != "ready" || ps.Runaway != 0 {
		t.Errorf("registry provider after the step ended: %+v", ps)
	}
	if txt, isErr, _ := f.call(t, "run__quick", `{}`); isErr || txt != "quick" {
		t.Errorf("after the step ended: %q %v", txt, isErr)
	}
}

func providerInfo(reg *registry.Registry, name string) registry.ProviderInfo {
	for _, p := range reg.Providers() {
		if p.Name == name {
			return p
		}
	}
	return registry.ProviderInfo{}
}

// TestNestingAndSizeBounds: the conversions of a value to text (str, repr,
// print, fail, json.encode, json.encode_indent), the text built from JSON
// (json.indent, json.decode) and a handler's result refuse a value nested
// more than 100 deep or text past their size, with an error naming the
// limit, at once: the quadratic or exponential step is never taken.
func TestNestingAndSizeBounds(t *testing.T) {
	src := runaway + `
def str_deep(p):
    return str(deep(100000))
def repr_deep(p):
    return repr(deep(1000))
def print_deep(p):
    print(deep(1000))
def fail_deep(p):
    fail(deep(1000))
def encode_deep(p):
    return json.encode(deep(1000))
def decode_deep(p):
    return json.decode("[" * 100000 + "]" * 100000)
def str_wide(p):
    return len(str(wide(25)))
def encode_wide(p):
    return len(json.encode(wide(25)))
def encode_indent_wide(p):
    return len(json.encode_indent(wide(12), indent = " " * 100000))
def indent_deep(p):
    return len(json.indent("[" * 5000 + "]" * 5000, indent = " " * 1000))
def result_wide(p):
    return wide(25)
def fail_long(p):
    fail("é" * (1 << 20))
def str_fine(p):
    x = {"a": [1, (2, 3), None, True, 1.5, "q\"", b"b", set([4])], "l": deep(50)}
    x["self"] = x
    return str(x) + " " + repr("s") + " " + json.encode({"k": [1, 2.5]}) + " " + str(json.decode("[[1]]"))
`
	src = strings.Replace(src, `Tool(name = "quick", handler = quick),`, `Tool(name = "quick", handler = quick),
        Tool(name = "str_deep", handler = str_deep),
        Tool(name = "repr_deep", handler = repr_deep),
        Tool(name = "print_deep", handler = print_deep),
        Tool(name = "fail_deep", handler = fail_deep),
        Tool(name = "encode_deep", handler = encode_deep),
        Tool(name = "decode_deep", handler = decode_deep),
        Tool(name = "str_wide", handler = str_wide),
        Tool(name = "encode_wide", handler = encode_wide),
        Tool(name = "encode_indent_wide", handler = encode_indent_wide),
        Tool(name = "indent_deep", handler = indent_deep),
        Tool(name = "result_wide", handler = result_wide),
        Tool(name = "str_fine", handler = str_fine),
        Tool(name = "fail_long", handler = fail_long),`, 1)
	f := start(t, map[string]string{"run.star": src}, func(o *Options) {
		// A hang guard: each bound is met within a second (several under
		// -race on a loaded machine).
		o.Registry = registry.New(registry.Options{DefaultTimeout: time.Minute})
	})
	for tool, want := range map[string]string{
		"str_deep":           "str: a value nested more than 100 deep",
		"repr_deep":          "repr: a value nested more than 100 deep",
		"print_deep":         "print: a value nested more than 100 deep",
		"fail_deep":          "fail: a value nested more than 100 deep",
		"encode_deep":        "json.encode: a value nested more than 100 deep",
		"decode_deep":        "json.decode: JSON nested more than 100 deep",
		"str_wide":           "str: a value whose text is longer than 8388608 bytes",
		"encode_wide":        "json.encode: a value whose text is longer than 8388608 bytes",
		"encode_indent_wide": "json.encode_indent: a value whose text is longer than 8388608 bytes",
		"indent_deep":        "json.indent: indented text is longer than 8388608 bytes",
		"result_wide":        "longer than 1048576 bytes",
	} {
		txt, isErr, code := f.call(t, "run__"+tool, `{}`)
		if !isErr || !strings.Contains(txt, want) || code != errcode.ExecFailed {
			t.Errorf("%s: %q isError=%v code=%s; want %q", tool, txt, isErr, code, want)
		}
	}
	// A message too long for a result is cut, and says so.
	if txt, isErr, _ := f.call(t, "run__fail_long", `{}`); !isErr || len(txt) > MaxOutputBytes || !strings.HasPrefix(txt, "run__fail_long: fail: éé") ||
		!strings.HasSuffix(txt, "é … (cut)") {
		t.Errorf("fail_long: %d bytes, isError=%v, %q … %q", len(txt), isErr, txt[:min(len(txt), 40)], txt[max(len(txt)-40, 0):])
	}
	// Within the bounds, the text is Starlark's own.
	want := `{"a": [1, (2, 3), None, True, 1.5, "q\"", b"b", set([4])], "l": ` + strings.Repeat("[", 51) + strings.Repeat("]", 51) +
		`, "self": {...}} "s" {"k":[1,2.5]} [[1]]`
	if txt, isErr, _ := f.call(t, "run__str_fine", `{}`); isErr || txt != want {
		t.Errorf("str_fine:\n got %s\nwant %s", txt, want)
	}
}

// TestStructFieldsFrozen: the structs extension code can make (Tool,
// ToolParameter, Extension) and get (http's response) freeze what they
// hold, so no list or dict can come to hold the struct that holds it:
// Starlark's own text of such a cycle recursed without end and ended the
// daemon with a fatal stack overflow.
func TestStructFieldsFrozen(t *testing.T) {
	src := `
def cycle(p):
    l = []
    t = Tool(name = "x", handler = l)
    l.append(t)
    return "%s" % (l,)

def describe_extension():
    return Extension(name = "cyc", tools = [Tool(name = "cycle", handler = cycle)])
`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"n":[1,2]}`)) }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	src = strings.Replace(src, "def describe_extension", `def response(p):
    r = http.get(p["url"])
    copy = list(r.json["n"])
    copy.append(r)
    r.json["n"].append(r)

def describe_extension`, 1)
	src = strings.Replace(src, `handler = cycle)`, `handler = cycle), Tool(name = "response", handler = response)`, 1)
	f := start(t, map[string]string{"cyc.star": src}, func(o *Options) {
		o.Net = netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}})
	})
	if txt, isErr, _ := f.call(t, "cyc__cycle", `{}`); !isErr || !strings.Contains(txt, "cannot append to frozen list") {
		t.Errorf("cycle through a struct: %q %v", txt, isErr)
	}
	// A copy of the response's JSON may change; the response's own may not.
	if txt, isErr, _ := f.call(t, "cyc__response", `{"url":"`+srv.URL+`/"}`); !isErr || !strings.Contains(txt, "cannot append to frozen list (cyc.star:") {
		t.Errorf("cycle through http's response: %q %v", txt, isErr)
	}
}

// TestToJSONBounds: ToJSON refuses past its size, naming it, and so does
// the text of a big int.
func TestToJSONBounds(t *testing.T) {
	v, err := FromJSON(json.RawMessage(`[` + strings.Repeat(`"`+strings.Repeat("x", 1<<20)+`",`, 9) + `1]`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ToJSON(v); err == nil || !strings.Contains(err.Error(), "longer than 8388608 bytes") {
		t.Errorf("ToJSON of 9 MiB: %v", err)
	}
	// An int of 9 million digits is refused before its text is made (that
	// takes seconds).
	huge := starlark.MakeBigInt(new(big.Int).Lsh(big.NewInt(1), 30_000_000))
	if _, err := ToJSON(huge); err == nil || !strings.Contains(err.Error(), "a value whose JSON is longer than 8388608 bytes") {
		t.Errorf("ToJSON of a 30-million-bit int: %v", err)
	}
	if _, err := valueText(huge, false, false, MaxTextBytes); err == nil || !strings.Contains(err.Error(), "a value whose text is longer than 8388608 bytes") {
		t.Errorf("the text of a 30-million-bit int: %v", err)
	}
}

func TestCutText(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789abcdefghij", 15, "01234 … (cut)"},
		{"ééééééééé", 13, "é … (cut)"}, // never half a rune
		{"0123456789", 3, " … (cut)"},
	} {
		if got := cutText(tc.s, tc.n); got != tc.want {
			t.Errorf("cutText(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

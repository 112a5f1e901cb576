package extensions

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/agentbe/agentbe-daemon/netguard"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// The extensions of this file are written the way starlark-mcp's published
// extensions are (docs/extensions.md, "Coming from starlark-mcp"): results
// indexed as dicts, response.get("status_code", 0), positional
// http.get(url, None, headers, None), time.now() % n, integer defaults
// written as strings. They are this repository's own, in that style.

// loopback lets the network door reach srv, and nothing else on loopback.
func loopback(t *testing.T, srv *httptest.Server) func(*Options) {
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	return func(o *Options) {
		o.Net = netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}})
	}
}

// seen is one request the stand-in API got.
type seen struct {
	Method, Path, Query, Body, ContentType, Accept, Token, User, Pass string
}

// standIn answers every request with the JSON of what it got (and a
// non-JSON body under /text), recording it.
func standIn(t *testing.T) (*httptest.Server, chan seen) {
	got := make(chan seen, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		user, pass, _ := r.BasicAuth()
		s := seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: string(body), ContentType: r.Header.Get("Content-Type"),
			Accept: r.Header.Get("Accept"), Token: r.Header.Get("X-Api-Key"), User: user, Pass: pass}
		got <- s
		w.Header().Set("X-Served-By", "stand-in")
		if r.URL.Path == "/text" {
			w.Write([]byte("plain words"))
			return
		}
		if r.URL.Path == "/missing" {
			w.WriteHeader(404)
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

const apiClient = `
HEADERS = {"Accept": "application/json", "X-Api-Key": "k-123"}

def error_response(message):
    return {"content": [{"type": "text", "text": "Error: " + message}], "isError": True}

def call_api(params):
    url = params["base"] + params.get("path", "/items")
    method = params.get("method", "GET")
    if method == "GET":
        response = http.get(url, None, HEADERS, None)
    elif method == "POST":
        response = http.post(url, None, HEADERS, json.encode(params.get("body", {})), None, None, None)
    elif method == "PUT":
        response = http.put(url, None, HEADERS, json.encode(params.get("body", {})), None, None, None)
    elif method == "DELETE":
        response = http.delete(url, None, HEADERS, None)
    else:
        return error_response("Unsupported HTTP method: {}".format(method))
    if response.get("status_code", 0) != 200:
        return error_response("API answered {}: {}".format(response["status_code"], response.get("body", "")))
    data = response.get("json", {})
    return {
        "content": [{"type": "text", "text": json.encode(data)}],
        "structuredContent": {"method": data["Method"], "accept": data["Accept"], "token": data["Token"], "body": data["Body"]},
    }

def search(params):
    response = http.get(
        url = params["base"] + "/search",
        params = {"q": params["q"], "limit": params["limit"]},
        headers = {"Accept": "application/json"},
        auth = ("ann", "s3cret"),
    )
    data = response["json"]
    return {"query": data["Query"], "user": data["User"], "pass": data["Pass"], "url": response["url"]}

def submit(params):
    form = http.post(params["base"] + "/form", form_body = {"a": "1", "b": "x y"})
    js = http.patch(url = params["base"] + "/js", json_body = {"n": [1, 2]})
    opt = http.options(params["base"] + "/opt")
    return {
        "form": [form["json"]["Body"], form["json"]["ContentType"]],
        "json": [js["json"]["Body"], js["json"]["ContentType"], js["json"]["Method"]],
        "options": opt["json"]["Method"],
    }

def shapes(params):
    r = http.get(params["base"] + "/text")
    keys = sorted([k for k in r.keys()])
    return {
        "keys": keys,
        "json_is_none": r["json"] == None and r.json == None,
        "both": r["status"] == r.status_code and r.body == r["body"],
        "header": r["headers"]["x-served-by"],
        "in": "status_code" in r and "nope" not in r,
        "type": type(r),
        "len": len(r),
        "dict": sorted(dict(r).keys()) == keys,
    }

def describe_extension():
    return Extension(
        name = "api_client",
        version = "1.0.0",
        description = "A client of a JSON API",
        tools = [
            Tool(name = "call_api", description = "Call the API", handler = call_api, parameters = [
                ToolParameter(name = "base", param_type = "string", required = True),
                ToolParameter(name = "path", param_type = "string"),
                ToolParameter(name = "method", param_type = "string", default = "GET"),
                ToolParameter(name = "body", param_type = "object"),
            ]),
            Tool(name = "search", description = "Search", handler = search, parameters = [
                ToolParameter(name = "base", param_type = "string", required = True),
                ToolParameter(name = "q", param_type = "string", required = True),
                ToolParameter(name = "limit", param_type = "integer", default = "10"),
            ]),
            Tool(name = "submit", description = "Bodies", handler = submit, parameters = [
                ToolParameter(name = "base", param_type = "string", required = True),
            ]),
            Tool(name = "shapes", description = "The response's shape", handler = shapes, parameters = [
                ToolParameter(name = "base", param_type = "string", required = True),
            ]),
        ],
    )
`

// TestHTTPAsPublished: the http module's signatures and response shape are
// starlark-mcp's: positional (url, params, headers, auth) and (url, params,
// headers, body, json_body, form_body, auth) put headers where they
// belong, keywords work, params join the query, auth is basic
// authentication, and a response answers r["json"], r.get("status_code")
// and r.status alike.
func TestHTTPAsPublished(t *testing.T) {
	srv, got := standIn(t)
	f := start(t, map[string]string{"api_client.star": apiClient}, loopback(t, srv))
	base := `"base":"` + srv.URL + `"`

	for _, method := range []string{"GET", "POST", "PUT", "DELETE"} {
		txt, isErr, _ := f.call(t, "api_client__call_api", `{`+base+`,"method":"`+method+`","body":{"name":"x"}}`)
		if isErr {
			t.Fatalf("%s: %s", method, txt)
		}
		s := <-got
		if s.Method != method || s.Accept != "application/json" || s.Token != "k-123" || s.Path != "/items" {
			t.Errorf("%s: the server got %+v", method, s)
		}
		if wantBody := map[string]string{"POST": `{"name":"x"}`, "PUT": `{"name":"x"}`}[method]; s.Body != wantBody {
			t.Errorf("%s: body %q, want %q", method, s.Body, wantBody)
		}
	}
	if txt, isErr, _ := f.call(t, "api_client__call_api", `{`+base+`,"path":"/missing"}`); !isErr || !strings.Contains(txt, "API answered 404") {
		t.Errorf("404: %q %v", txt, isErr)
	}
	<-got

	txt, isErr, _ := f.call(t, "api_client__search", `{`+base+`,"q":"a&b"}`)
	<-got
	want := `{"pass":"s3cret","query":"limit=10\u0026q=a%26b","url":"` + srv.URL + `/search?limit=10\u0026q=a%26b","user":"ann"}`
	if isErr || txt != want {
		t.Errorf("search:\n got %s\nwant %s", txt, want)
	}

	txt, isErr, _ = f.call(t, "api_client__submit", `{`+base+`}`)
	for range 3 {
		<-got
	}
	want = `{"form":["a=1\u0026b=x+y","application/x-www-form-urlencoded"],"json":["{\"n\":[1,2]}","application/json","PATCH"],"options":"OPTIONS"}`
	if isErr || txt != want {
		t.Errorf("submit:\n got %s\nwant %s", txt, want)
	}

	txt, isErr, _ = f.call(t, "api_client__shapes", `{`+base+`}`)
	<-got
	want = `{"both":true,"dict":true,"header":"stand-in","in":true,"json_is_none":true,"keys":["body","headers","json","status","status_code","truncated","url"],"len":7,"type":"response"}`
	if isErr || txt != want {
		t.Errorf("shapes:\n got %s\nwant %s", txt, want)
	}
}

// TestHTTPPublishedFormsKeepTheDoor: the published signatures reach only
// what the network door lets through; a bad argument is an error naming it.
func TestHTTPPublishedFormsKeepTheDoor(t *testing.T) {
	src := `
def h(params):
    kind = params["kind"]
    if kind == "meta":
        return http.get("http://169.254.169.254/latest/meta-data/", None, {"Accept": "x"}, None)
    if kind == "loop":
        return http.post("http://127.0.0.1:9/", None, None, "x", None, None, None)
    if kind == "params":
        return http.get("http://example.com/", ["not", "a dict"])
    if kind == "auth":
        return http.get("http://example.com/", auth = "user:pass")
    if kind == "two":
        return http.post("http://example.com/", body = "a", json_body = {})
    return http.get("http://example.com/", None, {"a": ["list"]})

def describe_extension():
    return Extension(name = "door", tools = [Tool(name = "h", handler = h)])
`
	f := start(t, map[string]string{"door.star": src}, nil)
	for kind, want := range map[string]string{
		"meta":   "refused",
		"loop":   "http.post: ",
		"params": "http.get: params must be a dict, not a list",
		"auth":   "http.get: auth must be a (username, password) pair",
		"two":    "http.post: give one of body, json_body and form_body",
		"header": `http.get: headers["a"] is a list, not a string or number`,
	} {
		txt, isErr, _ := f.call(t, "door__h", `{"kind":"`+kind+`"}`)
		if !isErr || !strings.Contains(txt, want) {
			t.Errorf("%s: %q %v; want %q", kind, txt, isErr, want)
		}
	}
}

// TestExecResultAsPublished: exec.run's result is indexed as a dict
// (result["success"], result["stdout"]) and read as attributes alike.
func TestExecResultAsPublished(t *testing.T) {
	src := `
def run(params):
    result = exec.run("sh", ["-c", params["script"]])
    if not result["success"]:
        return {"content": [{"type": "text", "text": "Failed: " + result["stderr"] + " exit " + str(result["exit_code"])}], "isError": True}
    return {
        "stdout": result["stdout"].strip(),
        "same": result.stdout == result["stdout"] and result.success == result.get("success"),
        "keys": sorted(result.keys()),
        "encoded": json.decode(json.encode(result))["exit_code"],
        "text": str(result).startswith("{"),
    }

def describe_extension():
    return Extension(name = "runner", allowed_exec = ["sh"], tools = [
        Tool(name = "run", handler = run, parameters = [ToolParameter(name = "script", param_type = "string", required = True)]),
    ])
`
	f := start(t, map[string]string{"runner.star": src}, nil)
	txt, isErr, _ := f.call(t, "runner__run", `{"script":"echo hello"}`)
	if want := `{"encoded":0,"keys":["exit_code","stderr","stdout","success"],"same":true,"stdout":"hello","text":true}`; isErr || txt != want {
		t.Errorf("got %s %v\nwant %s", txt, isErr, want)
	}
	txt, isErr, _ = f.call(t, "runner__run", `{"script":"echo oops >&2; exit 3"}`)
	if !isErr || txt != "Failed: oops\n exit 3" {
		t.Errorf("failure: %q %v", txt, isErr)
	}
}

// TestTimeNowIsUnixSeconds: time.now() is an int, the Unix time;
// time.now_time() is go.starlark.net's time value.
func TestTimeNowIsUnixSeconds(t *testing.T) {
	src := `
FACTS = ["a", "b", "c"]

def h(params):
    return {"now": time.now(), "type": type(time.now()), "fact": FACTS[time.now() % len(FACTS)], "year": time.now_time().year}

def describe_extension():
    return Extension(name = "clock", tools = [Tool(name = "h", handler = h)])
`
	f := start(t, map[string]string{"clock.star": src}, nil)
	before := time.Now().Unix()
	txt, isErr, _ := f.call(t, "clock__h", `{}`)
	after := time.Now().Unix()
	var got struct {
		Now  int64
		Type string
		Fact string
		Year int
	}
	if err := json.Unmarshal([]byte(txt), &got); err != nil || isErr {
		t.Fatalf("%q %v %v", txt, isErr, err)
	}
	if got.Now < before || got.Now > after || got.Type != "int" || got.Year != time.Now().Year() || !strings.Contains("abc", got.Fact) || got.Fact == "" {
		t.Errorf("%+v (between %d and %d)", got, before, after)
	}
}

// TestDefaultsCoerced: a default is coerced to its parameter's type when the
// file loads (the schema shows the coerced value); one that cannot be is a
// load error naming the extension, the tool and the parameter.
func TestDefaultsCoerced(t *testing.T) {
	src := `
def h(params):
    return {"limit": params["limit"] + 1, "ratio": params["ratio"] * 2, "on": params["on"] == True, "tags": params["tags"], "opts": params["opts"], "name": params["name"]}

def describe_extension():
    return Extension(name = "defaults", tools = [Tool(name = "h", handler = h, parameters = [
        ToolParameter(name = "limit", param_type = "integer", default = "100"),
        ToolParameter(name = "ratio", param_type = "number", default = " 0.25 "),
        ToolParameter(name = "on", param_type = "boolean", default = "True"),
        ToolParameter(name = "tags", param_type = "array", default = '["a", "b"]'),
        ToolParameter(name = "opts", param_type = "object", default = '{"k": 1}'),
        ToolParameter(name = "name", param_type = "string", default = 7),
    ])])
`
	bad := "def h(p):\n    return ''\ndef describe_extension():\n    return Extension(name = 'bad_default', tools = [Tool(name = 'sample', handler = h, parameters = [\n" +
		"        ToolParameter(name = 'count', param_type = 'integer', default = 'five')])])\n"
	f := start(t, map[string]string{"defaults.star": src, "bad_default.star": bad}, nil)
	if txt, isErr, _ := f.call(t, "defaults__h", `{}`); isErr || txt != `{"limit":101,"name":"7","on":true,"opts":{"k":1},"ratio":0.5,"tags":["a","b"]}` {
		t.Errorf("defaults: %s %v", txt, isErr)
	}
	if txt, _, _ := f.call(t, "defaults__h", `{"limit":1}`); !strings.Contains(txt, `"limit":2`) {
		t.Errorf("a given value: %s", txt)
	}
	tl, _ := f.reg.Lookup("defaults__h")
	schema, _ := json.Marshal(tl.InputSchema)
	if !bytes.Contains(schema, []byte(`"limit":{"default":100,"type":"integer"}`)) {
		t.Errorf("schema %s", schema)
	}
	var lastErr string
	for _, h := range f.p.Health() {
		if h.File == "bad_default.star" {
			lastErr = h.LastError
		}
	}
	if want := `describe_extension(): tool "sample" of extension "bad_default": parameter "count": default "five": is not an integer`; !strings.Contains(lastErr, want) {
		t.Errorf("bad default: %q; want %q", lastErr, want)
	}
}

// TestCoerceDefault: each type's coercions, and what none of them makes.
func TestCoerceDefault(t *testing.T) {
	for _, tc := range []struct{ typ, src, want string }{
		{"integer", `"100"`, "100"},
		{"integer", `100`, "100"},
		{"integer", `3.0`, "3"},
		{"integer", `3.5`, "error: is not a whole number"},
		{"integer", `"1e3"`, "error: is not an integer"},
		{"integer", `True`, "error: is a bool, not an integer"},
		{"number", `"2.5"`, "2.5"},
		{"number", `"nan"`, "error: is not a number"},
		{"number", `2`, "2"},
		{"boolean", `"false"`, "False"},
		{"boolean", `"yes"`, "error: is not true or false"},
		{"string", `1.5`, `"1.5"`},
		{"string", `[1]`, "error: is a list, not a string"},
		{"array", `"[1, 2]"`, "[1, 2]"},
		{"array", `"{}"`, "error: is a dict, not an array"},
		{"object", `"[1"`, "error: is not the JSON of an object"},
		{"object", `{"a": 1}`, `{"a": 1}`},
	} {
		v, err := evalExpr(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := coerceDefault(tc.typ, v)
		out := ""
		if err != nil {
			out = "error: " + err.Error()
		} else {
			out = got.String()
		}
		if !strings.HasPrefix(out, tc.want) {
			t.Errorf("%s %s: %s; want %s", tc.typ, tc.src, out, tc.want)
		}
	}
}

// TestLoadWithoutSuffix: load("name", ...) loads name.star of the
// directory, and nothing outside it.
func TestLoadWithoutSuffix(t *testing.T) {
	f := start(t, map[string]string{
		"greeter.star": "load('lib', 'greet')\ndef h(p):\n    return greet('x')\ndef describe_extension():\n    return Extension(name='greeter', tools=[Tool(name='hi', handler=h)])\n",
		"lib.star":     "def greet(n):\n    return 'hello ' + n\ndef describe_extension():\n    return Extension(name='lib', tools=[])\n",
		"escape.star":  "load('../lib', 'greet')\ndef describe_extension():\n    return Extension(name='escape', tools=[])\n",
	}, nil)
	if txt, _, _ := f.call(t, "greeter__hi", `{}`); txt != "hello x" {
		t.Errorf("load('lib'): %q", txt)
	}
	for _, h := range f.p.Health() {
		if h.File == "escape.star" && !strings.Contains(h.LastError, "only .star files inside the extensions directory") {
			t.Errorf("escape: %q", h.LastError)
		}
	}
}

// TestExtTestAsPublished: test files written as starlark-mcp's are (load
// without .star, testing.eq/ne/is_true/is_false/contains/fail) pass, and
// testing.fail fails a test at once with its message and line.
func TestExtTestAsPublished(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "greeting.star", `
def greet_handler(params):
    name = params.get("name", "World")
    count = params.get("count", 1)
    return {
        "content": [{"type": "text", "text": "Hello, " + name + "!"}],
        "structuredContent": {"name": name, "items": ["item_" + str(i) for i in range(count)], "at": time.now()},
    }

def describe_extension():
    return Extension(name = "greeting", tools = [Tool(name = "greet", handler = greet_handler, parameters = [
        ToolParameter(name = "name", param_type = "string"),
        ToolParameter(name = "count", param_type = "integer", default = "1"),
    ])])
`)
	write(t, dir, "greeting_test.star", `
load("greeting", "greet_handler")

def test_greet_default():
    """The default greeting."""
    result = greet_handler({})
    testing.is_true(type(result) == "dict", "Result should be a dict")
    testing.contains(result, "content", "Result should have 'content' key")
    testing.eq(result["content"][0]["text"], "Hello, World!")
    testing.eq(type(result["structuredContent"]["at"]), "int", "time.now() is an int")

def test_greet_items():
    data = greet_handler({"name": "Ann", "count": 3})["structuredContent"]
    testing.eq(len(data["items"]), 3, "Should have 3 items")
    testing.ne(data["items"][0], data["items"][1])
    testing.is_false(len(data["items"]) == 0)
    if data["name"] != "Ann":
        testing.fail("name should be Ann")

def test_fail_stops():
    testing.fail("stop here")
    testing.eq(1, 2, "never reached")
`)
	var out strings.Builder
	ok, err := RunTests(context.Background(), TestOptions{Dir: dir, Out: &out, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"--- PASS: greeting_test.star:test_greet_default",
		"--- PASS: greeting_test.star:test_greet_items",
		"--- FAIL: greeting_test.star:test_fail_stops",
		"    greeting_test.star:21: fail: stop here\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if ok || strings.Contains(got, "never reached") || strings.Contains(got, "the test called testing.fail") {
		t.Errorf("ok=%v\n%s", ok, got)
	}
}

func evalExpr(src string) (starlark.Value, error) {
	return starlark.EvalOptions(fileOptions, &starlark.Thread{}, "expr", src, nil)
}

// TestEnvRule: env.get reads what the extension declares or the operator
// lists (a name, or PREFIX_*); a variable that is not set gives the
// default; one that is set but neither lists, or that holds the daemon's
// secret, is an error saying so.
func TestEnvRule(t *testing.T) {
	src := `
def h(params):
    return env.get(params["name"], "fallback")

def describe_extension():
    return Extension(name = "envy", env = ["DECLARED", "HOLDER"], tools = [Tool(name = "h", handler = h)])
`
	vars := map[string]string{"DECLARED": "d", "OPS_A": "a", "EXACT": "e", "OPSX": "x", "OTHER": "o", "HOLDER": "x-daemon-token-y"}
	f := start(t, map[string]string{"envy.star": src}, func(o *Options) {
		o.EnvAllow = []string{"OPS_*", "EXACT"}
		o.Getenv = func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	})
	for _, tc := range []struct {
		name, want string
		isErr      bool
	}{
		{"DECLARED", "d", false},
		{"OPS_A", "a", false},
		{"EXACT", "e", false},
		{"UNSET", "fallback", false},
		{"OPSX", "env.get: OPSX is set, but extension envy may not read it: list it in the extension's env=[...] or the operator's --extensions-env", true},
		{"OTHER", "env.get: OTHER is set, but extension envy may not read it", true},
		{"HOLDER", "env.get: HOLDER holds a secret of the daemon's", true},
	} {
		txt, isErr, _ := f.call(t, "envy__h", `{"name":"`+tc.name+`"}`)
		if isErr != tc.isErr || !strings.Contains(txt, tc.want) || !tc.isErr && txt != tc.want {
			t.Errorf("%s: %q %v; want %q %v", tc.name, txt, isErr, tc.want, tc.isErr)
		}
	}
}

// pgExplorer is written as starlark-mcp's PostgreSQL extension is: the
// connection built from POSTGRES_* variables, no allowed_db_hosts (the
// operator allows the host), list_tables rows with "tablename",
// describe_table rows with column_name, data_type, is_nullable and
// column_default, execute giving the count of rows changed.
const pgExplorer = `
def get_config():
    conn_str = env.get("POSTGRES_CONNECTION_STRING", "")
    if conn_str:
        return conn_str
    host = env.get("POSTGRES_HOST", "localhost")
    port = env.get("POSTGRES_PORT", "5432")
    user = env.get("POSTGRES_USER", "postgres")
    password = env.get("POSTGRES_PASSWORD", "")
    database = env.get("POSTGRES_DATABASE", "postgres")
    return "postgresql://{}:{}@{}:{}/{}?sslmode=disable".format(user, password, host, port, database)

def error_response(message):
    return {"content": [{"type": "text", "text": "Error: " + message}], "isError": True}

def list_tables(params):
    tables = postgres.list_tables(get_config(), params.get("schema", "public"))
    output = "Found {} table(s):\n".format(len(tables))
    for table in tables:
        output += "- {}\n".format(table["tablename"])
    return {"content": [{"type": "text", "text": output}]}

def describe_table(params):
    columns = postgres.describe_table(get_config(), params["table_name"], params.get("schema", "public"))
    if not columns:
        return error_response("Table '{}' not found".format(params["table_name"]))
    output = ""
    for col in columns:
        nullable = "NULL" if col["is_nullable"] == "YES" else "NOT NULL"
        output += "{} {} {}".format(col["column_name"], col["data_type"], nullable)
        if col.get("column_default"):
            output += " DEFAULT {}".format(col["column_default"])
        output += "\n"
    return {"content": [{"type": "text", "text": output}]}

def run_sql(params):
    sql = params["sql"]
    if sql.strip().upper().startswith("SELECT"):
        rows = postgres.query(get_config(), sql, params.get("params", []))
        return {"content": [{"type": "text", "text": json.encode(rows)}]}
    affected_rows = postgres.execute(get_config(), sql, params.get("params", []))
    return {"content": [{"type": "text", "text": "Affected rows: {}".format(affected_rows)}]}

def describe_extension():
    return Extension(
        name = "postgres",
        version = "1.0.0",
        description = "PostgreSQL database integration",
        tools = [
            Tool(name = "postgres_list_tables", description = "List tables", handler = list_tables, parameters = [
                ToolParameter(name = "schema", param_type = "string", required = False, default = "public"),
            ]),
            Tool(name = "postgres_describe_table", description = "Describe a table", handler = describe_table, parameters = [
                ToolParameter(name = "table_name", param_type = "string", required = True),
                ToolParameter(name = "schema", param_type = "string", required = False, default = "public"),
            ]),
            Tool(name = "postgres_sql", description = "Run SQL", handler = run_sql, parameters = [
                ToolParameter(name = "sql", param_type = "string", required = True),
            ]),
        ],
    )
`

// TestPostgresAsPublished: against a real PostgreSQL, an extension written
// as starlark-mcp's is works when the operator lists its variables
// (--extensions-env POSTGRES_*) and its host (--extensions-db-hosts); the
// network door still admits only the server's loopback port.
func TestPostgresAsPublished(t *testing.T) {
	port, password := startPostgres(t)
	vars := map[string]string{"POSTGRES_HOST": "127.0.0.1", "POSTGRES_PORT": strconv.Itoa(port), "POSTGRES_PASSWORD": password}
	f := start(t, map[string]string{"postgres.star": pgExplorer}, func(o *Options) {
		o.Getenv = func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
		o.EnvAllow = []string{"POSTGRES_*"}
		o.DBHosts = []string{"127.0.0.1"}
		o.PostgresNet = netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}})
	})
	mustCall := func(tool, args, want string) {
		t.Helper()
		txt, isErr, _ := f.call(t, tool, args)
		if isErr || txt != want {
			t.Errorf("%s %s:\n got %q isError=%v\nwant %q", tool, args, txt, isErr, want)
		}
	}
	mustCall("postgres__postgres_sql", `{"sql":"CREATE TABLE pets (id serial PRIMARY KEY, name varchar(40) NOT NULL, kind text DEFAULT 'cat')"}`, "Affected rows: 0")
	mustCall("postgres__postgres_sql", `{"sql":"CREATE TABLE owners (id int)"}`, "Affected rows: 0")
	mustCall("postgres__postgres_sql", `{"sql":"INSERT INTO pets (name) VALUES ('tom'), ('felix')"}`, "Affected rows: 2")
	mustCall("postgres__postgres_sql", `{"sql":"SELECT name, kind FROM pets ORDER BY id"}`, `[{"kind":"cat","name":"tom"},{"kind":"cat","name":"felix"}]`)
	mustCall("postgres__postgres_list_tables", `{}`, "Found 2 table(s):\n- owners\n- pets\n")
	mustCall("postgres__postgres_describe_table", `{"table_name":"pets"}`,
		"id integer NOT NULL DEFAULT nextval('pets_id_seq'::regclass)\nname character varying NOT NULL\nkind text NULL DEFAULT 'cat'::text\n")
	if txt, isErr, _ := f.call(t, "postgres__postgres_describe_table", `{"table_name":"pets'; DROP TABLE pets; --"}`); !isErr || !strings.Contains(txt, "Error: Table 'pets'; DROP TABLE pets; --' not found") {
		t.Errorf("a table that is not there: %q %v", txt, isErr)
	}
	if txt, isErr, _ := f.call(t, "postgres__postgres_list_tables", `{"schema":"pg_catalog"}`); isErr || !strings.Contains(txt, "- pg_class\n") || strings.Contains(txt, "- pets\n") {
		t.Errorf("schema pg_catalog: %q %v", txt, isErr)
	}

	// Without the operator's host, the extension's connection is refused,
	// naming both places a host may be allowed.
	g := start(t, map[string]string{"postgres.star": pgExplorer}, func(o *Options) {
		o.Getenv = func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
		o.EnvAllow = []string{"POSTGRES_*"}
		o.PostgresNet = netguard.New(netguard.Options{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, AllowPorts: []uint16{uint16(port)}})
	})
	if txt, isErr, _ := g.call(t, "postgres__postgres_list_tables", `{}`); !isErr || !strings.Contains(txt, `postgres.list_tables: host "127.0.0.1" is not in the allowed_db_hosts of extension postgres ([]) nor the operator's --extensions-db-hosts ([])`) {
		t.Errorf("no host allowed: %q %v", txt, isErr)
	}
}

// cliTools are written as starlark-mcp's docker, github and kubectl
// extensions are: exec.run of a program the extension allows, its result
// indexed (result["success"], result["stderr"]), a failure returned as an
// error result.
const cliTools = `
def error_response(message):
    return {"content": [{"type": "text", "text": "Error: " + message}], "isError": True}

def list_containers(params):
    args = ["ps", "--format", "json"]
    if params.get("all", True):
        args.append("--all")
    result = exec.run("docker", args)
    if not result["success"]:
        return error_response("Failed to list containers: " + result["stderr"])
    return {"content": [{"type": "text", "text": result["stdout"]}]}

def run_gh(args):
    result = exec.run("gh", args)
    if not result["success"]:
        return {"error": result["stderr"], "success": False}
    return {"output": result["stdout"], "success": True}

def list_prs(params):
    repo = params.get("repo", "") or env.get("GITHUB_DEFAULT_REPO", "")
    result = run_gh(["pr", "list", "--repo", repo, "--json", "number,title"])
    if not result["success"]:
        return error_response("gh failed: " + result["error"])
    return {"content": [{"type": "text", "text": result["output"]}]}

def cluster_info(params):
    args = []
    kubeconfig = env.get("KUBECONFIG", "")
    if kubeconfig:
        args.append("--kubeconfig=" + kubeconfig)
    result = exec.run("kubectl", args + ["cluster-info"])
    if not result["success"]:
        return error_response("Failed to get cluster info: " + result.get("stderr", ""))
    return {"content": [{"type": "text", "text": result["stdout"]}]}

def not_declared(params):
    result = exec.run("helm", ["list"])
    return {"content": [{"type": "text", "text": result["stdout"]}]}

def describe_extension():
    return Extension(
        name = "cli",
        allowed_exec = ["docker", "gh", "kubectl"],
        tools = [
            Tool(name = "docker_list_containers", handler = list_containers, parameters = [
                ToolParameter(name = "all", param_type = "boolean", default = "true"),
            ]),
            Tool(name = "github_list_prs", handler = list_prs, parameters = [ToolParameter(name = "repo", param_type = "string")]),
            Tool(name = "k8s_cluster_info", handler = cluster_info),
            Tool(name = "helm_list", handler = not_declared),
        ],
    )
`

// TestCLIExtensionsAsPublished: where docker, gh and kubectl are not
// installed (the test makes sure with an empty PATH), their tools answer
// an error result in the extensions' own shape; a program the extension
// does not allow is refused naming allowed_exec.
func TestCLIExtensionsAsPublished(t *testing.T) {
	emptyPath := t.TempDir()
	f := start(t, map[string]string{"cli.star": cliTools}, func(o *Options) {
		o.Getenv = func(string) (string, bool) { return "", false }
		exe, err := sandbox.New(sandbox.Config{Mode: sandbox.ModeSoftware, WorkspaceRoot: o.Workspace.Root(), Env: map[string]string{"PATH": emptyPath}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { exe.Close() })
		o.Executor = exe
	})
	for tool, want := range map[string]string{
		"cli__docker_list_containers": "Error: Failed to list containers: ",
		"cli__github_list_prs":        "Error: gh failed: ",
		"cli__k8s_cluster_info":       "Error: Failed to get cluster info: ",
		"cli__helm_list":              `exec.run: "helm" is not in the allowed_exec of extension cli ([docker gh kubectl])`,
	} {
		txt, isErr, _ := f.call(t, tool, `{}`)
		if !isErr || !strings.Contains(txt, want) || tool != "cli__helm_list" && !strings.Contains(txt, "not found") {
			t.Errorf("%s: %q %v; want %q", tool, txt, isErr, want)
		}
	}
}

// sqliteExplorer is written as starlark-mcp's SQLite explorer is: rows of
// list_tables read as table["name"], describe_table's col.get("dflt_value"),
// an integer limit whose default is the string "100", exec.run("ls")
// indexed for the file's size.
const sqliteExplorer = `
def error_response(message):
    return {"content": [{"type": "text", "text": "Error: " + message}], "isError": True}

def seed(params):
    sqlite.execute(params["db_path"], "CREATE TABLE birds (id INTEGER PRIMARY KEY, name TEXT NOT NULL, wings INTEGER DEFAULT 2)")
    sqlite.execute(params["db_path"], "CREATE TABLE nests (bird_id INTEGER)")
    for name in ["robin", "wren", "kiwi"]:
        sqlite.execute(params["db_path"], "INSERT INTO birds (name) VALUES (?)", [name])
    return "seeded"

def list_tables(params):
    tables = sqlite.list_tables(params["db_path"])
    if not tables:
        return {"content": [{"type": "text", "text": "No tables found in database"}]}
    table_list = "Found {} tables:\n".format(len(tables))
    for table in tables:
        table_list += "  - {}\n".format(table["name"])
    return {"content": [{"type": "text", "text": table_list}]}

def describe_table(params):
    columns = sqlite.describe_table(params["db_path"], params["table"])
    schema = "Table: {}\n".format(params["table"])
    for col in columns:
        schema += "  {} {} {}".format(col.get("name", ""), col.get("type", "TEXT"), "(PRIMARY KEY)" if col.get("pk", 0) > 0 else "")
        if col.get("notnull", 0):
            schema += " NOT NULL"
        if col.get("dflt_value", None):
            schema += " DEFAULT {}".format(col.get("dflt_value"))
        schema += "\n"
    count_result = sqlite.query(params["db_path"], "SELECT COUNT(*) as count FROM " + params["table"], [])
    if count_result and len(count_result) > 0:
        schema += "Row count: {}\n".format(count_result[0].get("count", 0))
    return {"content": [{"type": "text", "text": schema}]}

def query(params):
    sql = params.get("query", "")
    limit = params.get("limit", 100)
    if limit > 0 and "LIMIT" not in sql.upper():
        sql = sql + " LIMIT {}".format(limit)
    rows = sqlite.query(params["db_path"], sql, [])
    return {"content": [{"type": "text", "text": "Query returned {} row(s):\n\n".format(len(rows)) + json.encode(rows)}]}

def analyze(params):
    db_path = params["db_path"]
    analysis = ""
    size_result = exec.run("ls", ["-l", db_path])
    if size_result["success"]:
        parts = size_result["stdout"].strip().split()
        if len(parts) >= 5:
            analysis += "Database size: {}\n".format(parts[4])
    tables = sqlite.list_tables(db_path)
    analysis += "Number of tables: {}\n".format(len(tables))
    integrity_result = sqlite.query(db_path, "PRAGMA integrity_check", [])
    if integrity_result[0].get("integrity_check", "") == "ok":
        analysis += "Database integrity: OK\n"
    return {"content": [{"type": "text", "text": analysis}]}

def describe_extension():
    return Extension(
        name = "sqlite_explorer",
        version = "1.0.0",
        allowed_exec = ["ls"],
        tools = [
            Tool(name = "seed", handler = seed, parameters = [ToolParameter(name = "db_path", param_type = "string", required = True)]),
            Tool(name = "sqlite_list_tables", handler = list_tables, parameters = [ToolParameter(name = "db_path", param_type = "string", required = True)]),
            Tool(name = "sqlite_describe_table", handler = describe_table, parameters = [
                ToolParameter(name = "db_path", param_type = "string", required = True),
                ToolParameter(name = "table", param_type = "string", required = True),
            ]),
            Tool(name = "sqlite_query", handler = query, parameters = [
                ToolParameter(name = "db_path", param_type = "string", required = True),
                ToolParameter(name = "query", param_type = "string", required = True),
                ToolParameter(name = "limit", param_type = "integer", required = False, default = "100"),
            ]),
            Tool(name = "sqlite_analyze", handler = analyze, parameters = [ToolParameter(name = "db_path", param_type = "string", required = True)]),
        ],
    )
`

// TestSQLiteExplorerAsPublished: every tool of an explorer written as
// starlark-mcp's is works.
func TestSQLiteExplorerAsPublished(t *testing.T) {
	f := start(t, map[string]string{"sqlite_explorer.star": sqliteExplorer}, nil)
	mustCall := func(tool, args, want string) {
		t.Helper()
		txt, isErr, _ := f.call(t, tool, args)
		if isErr || txt != want {
			t.Errorf("%s %s:\n got %q isError=%v\nwant %q", tool, args, txt, isErr, want)
		}
	}
	db := `"db_path":"zoo.db"`
	mustCall("sqlite_explorer__seed", `{`+db+`}`, "seeded")
	mustCall("sqlite_explorer__sqlite_list_tables", `{`+db+`}`, "Found 2 tables:\n  - birds\n  - nests\n")
	mustCall("sqlite_explorer__sqlite_describe_table", `{`+db+`,"table":"birds"}`,
		"Table: birds\n  id INTEGER (PRIMARY KEY)\n  name TEXT  NOT NULL\n  wings INTEGER  DEFAULT 2\nRow count: 3\n")
	mustCall("sqlite_explorer__sqlite_query", `{`+db+`,"query":"SELECT name FROM birds ORDER BY id"}`,
		"Query returned 3 row(s):\n\n"+`[{"name":"robin"},{"name":"wren"},{"name":"kiwi"}]`)
	mustCall("sqlite_explorer__sqlite_query", `{`+db+`,"query":"SELECT name FROM birds ORDER BY id","limit":1}`,
		"Query returned 1 row(s):\n\n"+`[{"name":"robin"}]`)
	txt, isErr, _ := f.call(t, "sqlite_explorer__sqlite_analyze", `{`+db+`}`)
	if isErr || !strings.HasPrefix(txt, "Database size: ") || !strings.HasSuffix(txt, "Number of tables: 2\nDatabase integrity: OK\n") {
		t.Errorf("analyze: %q %v", txt, isErr)
	}
}

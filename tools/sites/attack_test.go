package sites

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// TestAttackArgumentInjection: whatever an argument holds (shell syntax,
// newlines, quotes, option-looking text, unicode that looks like a path,
// invalid UTF-8), the program receives it as one argv element, byte for
// byte: nothing reaches a shell unquoted. A {key} value is substituted
// once, never again, and cannot change the program a pattern names.
func TestAttackArgumentInjection(t *testing.T) {
	s, root := exampleSite(t, nil)
	writePage(t, root, "inj.md", "---\ntools:\n  - [printf, \"%s|\", {}, \";\"]\n---\n# inj\n")
	for _, v := range []string{
		"; touch pwned", "$(touch pwned)", "`touch pwned`", "a\ntouch pwned", "'; touch pwned; '",
		`"; touch pwned; "`, "$HOME", "${IFS}x", "*", "~", "-v", "--version", "--", "\t", "a\\", "!!",
		"\u00a0x", "\uff0fetc\uff0fpasswd", "\u2025\uff0fx", "\ufb01le", "e\u0301", "\x1b[2J", "x\x7f",
		strings.Repeat("x", 100<<10),
	} {
		res, err := s.Run(context.Background(), "inj.md", ActionRequest{Command: []string{"printf", "%s|", v}})
		if err != nil || res.Stdout != v+"|" || res.Returncode != 0 {
			t.Errorf("%.40q: %v %.80q %.80q %d", v, err, res.Stdout, res.Stderr, res.Returncode)
		}
	}
	// Bytes that are not UTF-8 cannot be judged by the command policy: the
	// command is refused, and nothing runs.
	if _, err := s.Run(context.Background(), "inj.md", ActionRequest{Command: []string{"printf", "%s|", "\xff\xfe$(touch pwned)"}}); status(err) != http.StatusForbidden {
		t.Errorf("invalid UTF-8: %v", err)
	}
	// A placeholder's value is substituted once: {b} inside a's value stays.
	res, err := s.Run(context.Background(), "inj.md", ActionRequest{Command: []string{"printf", "%s|", "{a}"}, Args: map[string]string{"a": "{b}", "b": "$(touch pwned)"}})
	if err != nil || res.Stdout != "{b}|" {
		t.Errorf("nested placeholder: %v %q", err, res.Stdout)
	}
	// A placeholder cannot name another program than the pattern's.
	for _, prog := range []string{"sh", "printf\n", " printf"} {
		if _, err := s.Run(context.Background(), "inj.md", ActionRequest{Command: []string{"{p}", "%s|", "x"}, Args: map[string]string{"p": prog}}); status(err) != http.StatusForbidden {
			t.Errorf("program %q through a placeholder: %v", prog, err)
		}
	}
	// An element over the kernel's bound for one argument (128 KiB) runs
	// nothing and says so; a NUL is refused before anything runs.
	if _, err := s.Run(context.Background(), "inj.md", ActionRequest{Command: []string{"printf", "%s|", strings.Repeat("x", 1<<20)}}); status(err) != http.StatusRequestEntityTooLarge {
		t.Errorf("a 1 MiB argument: %.200v", err)
	}
	// A placeholder repeated with a large value: a request of 43 KB that
	// would expand to 40 MB in one element, and one whose elements stay
	// under the kernel's bound but add up to 8 MB, are refused before they
	// are built (the allocation is counted: not thousands of times the
	// request).
	for name, cmd := range map[string][]string{
		"one element": {"printf", "%s|", strings.Repeat("{a}", 1000)},
		"in all":      append([]string{"printf", "%s|"}, slices.Repeat([]string{"{a}{a}{a}"}, 64)...),
	} {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, err := s.Run(context.Background(), "inj.md", ActionRequest{Command: cmd, Args: map[string]string{"a": strings.Repeat("x", 40000)}})
		runtime.ReadMemStats(&m1)
		if status(err) != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %.200v", name, err)
		}
		// Counted process-wide: the refusal itself allocates a few MB at
		// most (up to 10 under -race, the runtime's own); building the
		// command took 79 MB (in all) and 420 MB (one element).
		if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 32<<20 {
			t.Errorf("%s: %d MB allocated for a refused request", name, alloc>>20)
		}
	}
	if _, err := s.Run(context.Background(), "inj.md", ActionRequest{Command: []string{"printf", "%s|", "a\x00b"}}); status(err) != http.StatusBadRequest {
		t.Errorf("NUL: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "pwned")); err == nil {
		t.Fatal("an argument ran a command")
	}
}

func status(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// TestAttackPathArguments: the arguments that name a file outside the
// page's directory through a value (an option's, a NAME=VALUE operand's,
// a response file's, a file: URI's) are refused like a bare absolute
// path, before anything runs; look-alikes that are not paths run.
func TestAttackPathArguments(t *testing.T) {
	s, root := exampleSite(t, nil)
	writePage(t, root, "dd.md", "---\ntools:\n  - [printf, \"%s|\", {}, \";\"]\n---\n# dd\n")
	for _, a := range []string{"if=/etc/passwd", "of=/tmp/x", "--output=/x", "VAR=/x", "x.y-z_1=/x", "@/etc/passwd", "file:/etc/passwd", "FILE:///etc/passwd", "-o/x", "/x", "a/../b"} {
		if _, err := s.Run(context.Background(), "dd.md", ActionRequest{Command: []string{"printf", "%s|", a}}); status(err) != http.StatusForbidden {
			t.Errorf("%q: %v", a, err)
		}
	}
	for _, a := range []string{"if=data/cities.csv", "https://api.example/?next=/x", "a=b/c", "user@/", "file:x", "x=", "=/"} {
		if res, err := s.Run(context.Background(), "dd.md", ActionRequest{Command: []string{"printf", "%s|", a}}); err != nil || res.Stdout != a+"|" {
			t.Errorf("%q: %v %q", a, err, res.Stdout)
		}
	}
}

// TestAttackProgramJudgedIsRun: the program a pattern names is looked up
// on the sandbox's PATH only: a file of that name planted in the page's
// directory (or a bin/ of it) never runs, and a request cannot set PATH.
func TestAttackProgramJudgedIsRun(t *testing.T) {
	s, root := exampleSite(t, nil)
	mark := filepath.Join(root, "planted-ran")
	for _, p := range []string{"ls", "bin/ls", "data/ls"} {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.WriteFile(filepath.Join(root, p), []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, page := range []string{"README.md", "data/README.md"} {
		writePage(t, root, page, "---\ntools:\n  - [ls]\n---\n")
		res, err := s.Run(context.Background(), page, ActionRequest{Command: []string{"ls"}})
		if err != nil || !strings.Contains(res.Stdout, "ls\n") {
			t.Errorf("%s: ls: %v %+v", page, err, res)
		}
		for _, env := range []map[string]string{{"PATH": "."}, {"PATH": root + "/bin"}, {"path": "."}} {
			if _, err := s.Run(context.Background(), page, ActionRequest{Command: []string{"ls"}, Env: env}); status(err) != http.StatusBadRequest {
				t.Errorf("%s: env %v: %v", page, env, err)
			}
		}
	}
	if _, err := os.Stat(mark); err == nil {
		t.Fatal("a program planted in the site ran instead of the one on PATH")
	}
}

// TestAttackEnvFileStaysOut: the operator's env file may hold any
// KEY=VALUE (LD_PRELOAD, PATH, a secret): its values only fill $NAME in
// the pages' literals, never the command's environment.
func TestAttackEnvFileStaysOut(t *testing.T) {
	env, err := ParseEnvFile("site.env", []byte("LD_PRELOAD=/tmp/evil.so\nPATH=/tmp/evil\nexport API_KEY='s3cret-value'\nBASH_ENV=/tmp/evil.sh\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, root := exampleSite(t, func(o *Options) { o.Env = env })
	writePage(t, root, "env.md", "---\ntools:\n  - [env]\n  - [printf, \"%s|\", \"$API_KEY\", \";\"]\n---\n")
	res, err := s.Run(context.Background(), "env.md", ActionRequest{Command: []string{"env"}})
	if err != nil || res.Returncode != 0 {
		t.Fatalf("env: %v %+v", err, res)
	}
	for _, leak := range []string{"/tmp/evil", "s3cret-value", "LD_PRELOAD", "BASH_ENV"} {
		if strings.Contains(res.Stdout, leak) {
			t.Errorf("the command's environment holds %q:\n%s", leak, res.Stdout)
		}
	}
	// Where a literal names it, the value fills that argument only.
	if res, err := s.Run(context.Background(), "env.md", ActionRequest{Command: []string{"printf", "%s|", "$API_KEY"}}); err != nil || res.Stdout != "s3cret-value|" {
		t.Errorf("$API_KEY in a literal: %v %q", err, res.Stdout)
	}
}

// TestAttackFrontmatter: a page's frontmatter cannot make parsing costly
// (YAML aliases are not expanded, nesting is bounded in both languages
// before anything large is built), nor mean one thing to this server and
// another to a reader (a repeated tools key is refused); a pattern's
// program with a path, "..", or a control character runs nothing.
func TestAttackFrontmatter(t *testing.T) {
	deep := func(open, close string, n int) string { return strings.Repeat(open, n) + strings.Repeat(close, n) }
	for _, tc := range []struct{ name, page, want string }{
		{"yaml alias bomb", "---\na: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ntools: [*d]\n---\n", "a tool must be a non-empty list"},
		{"yaml deep", "---\ntools: " + deep("[", "]", 1<<19) + "\n---\n", "exceeded max depth"},
		{"yaml deep mapping", "---\ntools: " + strings.Repeat("{a: ", 1<<17) + "1" + strings.Repeat("}", 1<<17) + "\n---\n", "exceeded max depth"},
		{"toml deep", "+++\ntools = " + deep("[", "]", 1<<19) + "\n+++\n", "nested deeper than 32"},
		{"toml deep tables", "+++\ntools = [[" + strings.Repeat("{a=", 1<<17) + "1" + strings.Repeat("}", 1<<17) + "]]\n+++\n", "nested deeper than 32"},
		{"yaml tools twice", "---\ntools:\n  - [ls]\ntools:\n  - [rm, {}]\n---\n", "frontmatter line 4: `tools` is defined twice (lines 2 and 4)"},
		{"toml tools twice", "+++\ntools = [[\"ls\"]]\ntools = [[\"rm\"]]\n+++\n", "already defined"},
		{"too many tools", "---\ntools:\n" + strings.Repeat("  - [ls]\n", MaxSpecs+1) + "---\n", "more than 256 tools"},
		{"too many parts", "---\ntools:\n  - [ls" + strings.Repeat(", {}", MaxSpecParts) + "]\n---\n", "more than 64 elements"},
	} {
		_, _, err := ParseFrontmatter([]byte(tc.page))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
	// Brackets inside TOML strings and comments are not nesting.
	ok := "+++\n# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\ntools = [[\"grep\", {regex = \"" + strings.Repeat("[a]", 40) + "\"}], ['echo', '" + strings.Repeat("{", 40) + "'], [\"\"\"x\n" + strings.Repeat("[", 40) + "\"\"\"]]\n+++\n"
	if specs, _, err := ParseFrontmatter([]byte(ok)); err != nil || len(specs) != 3 {
		t.Errorf("brackets in strings: %v %v", err, specs)
	}
	s, root := exampleSite(t, nil)
	writePage(t, root, "names.md", "---\ntools:\n  - [/bin/sh, {}]\n  - [../sh, {}]\n  - [\"sh\\n\", {}]\n  - [\"sh\\u0000\", {}]\n---\n")
	for _, name := range []string{"/bin/sh", "../sh"} {
		if _, err := s.Run(context.Background(), "names.md", ActionRequest{Command: []string{name, "-c", "touch pwned"}}); status(err) != http.StatusForbidden {
			t.Errorf("%q: %v", name, err)
		}
	}
	if res, err := s.Run(context.Background(), "names.md", ActionRequest{Command: []string{"sh\n", "-c", "touch pwned"}}); err == nil && res.Returncode == 0 {
		t.Errorf("sh with a newline ran: %+v", res)
	}
	if _, err := s.Run(context.Background(), "names.md", ActionRequest{Command: []string{"sh\x00", "-c", "touch pwned"}}); status(err) != http.StatusBadRequest {
		t.Errorf("a NUL in the program: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "pwned")); err == nil {
		t.Fatal("a pattern's program name ran a shell")
	}
}

// TestAttackSitePaths sends request lines as a raw client can (encoded
// dots and slashes, double encoding, a second slash), and reads pages that
// are links out of the site, a FIFO and a device: nothing outside the site
// is served, and nothing waits.
func TestAttackSitePaths(t *testing.T) {
	s, root := exampleSite(t, nil)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret.md"), []byte("---\ntools:\n  - [sh, {}]\n---\nTOP-SECRET-CONTENT\n"), 0o644)
	for link, target := range map[string]string{"out": outside, "out.md": filepath.Join(outside, "secret.md"), "zero.md": "/dev/zero", "etc": "/etc"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(serve(s))
	defer srv.Close()
	raw := func(method, target, body string) (int, string) {
		t.Helper()
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", method, target, srv.Listener.Addr(), len(body), body)
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		defer res.Body.Close()
		b := make([]byte, 4096)
		n, _ := res.Body.Read(b)
		return res.StatusCode, string(b[:n])
	}
	for _, target := range []string{
		"/%2e%2e/%2e%2e/etc/passwd", "/..%2f..%2fetc%2fpasswd", "/data/%2e%2e/%2e%2e/etc/passwd", "//etc/passwd",
		"/%2fetc%2fpasswd", "/out/secret.md", "/out", "/out.md", "/zero.md", "/etc/passwd", "/etc/hostname", "/fifo.md",
		"/%252e%252e/%252e%252e/etc/passwd", "/data/..%5c..%5cetc/passwd", "/README.md%00.csv",
	} {
		code, body := raw("GET", target, "")
		if code == http.StatusOK || strings.Contains(body, "root:") || strings.Contains(body, "TOP-SECRET") {
			t.Errorf("GET %s: %d %.100q", target, code, body)
		}
		code, body = raw("POST", target, `{"command":["sh","-c","echo pwned"]}`)
		if code == http.StatusOK || strings.Contains(body, "pwned\\n") {
			t.Errorf("POST %s: %d %.100q", target, code, body)
		}
	}
	// A header block over net/http's default bound (1 MiB, which site serve
	// keeps: it sets no MaxHeaderBytes), as one huge header or many small
	// ones, is 431 before the handler runs.
	for name, hdr := range map[string]string{
		"one header":   "X-Big: " + strings.Repeat("a", 2<<20) + "\r\n",
		"many headers": strings.Repeat("X-Many: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n", 40000),
	} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		go fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\n%s\r\n", srv.Listener.Addr(), hdr)
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a bound for a hung test
		if res, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("%s: %v %v", name, res, err)
		}
		c.Close()
	}
	for _, method := range []string{"PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND"} {
		if code, _ := raw(method, "/", `{"command":["ls"]}`); code != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d", method, code)
		}
	}
}

// TestAttackReaderRunsNoComponent: a token that may not run commands
// (read-only, or "exec": false) reads a page whose component blocks would
// run commands (one that writes, here): by GET, by the browser's
// overview, and by read_page, the blocks are shown as not run and nothing
// runs; a token that may run commands gets them run.
func TestAttackReaderRunsNoComponent(t *testing.T) {
	s, root := exampleSite(t, nil)
	writePage(t, root, "README.md", "---\ntools:\n  - [touch, {}]\n  - [echo, {}]\n---\n# Front\n\n```component\ntouch ran-front\n```\n")
	writePage(t, root, "w.md", "---\ntools:\n  - [touch, {}]\n  - [echo, {}]\n---\n# W\n\n```component\ntouch ran-w\n```\n\n```component\necho evaluated\n```\n")
	set, err := httpguard.ParseTokens("tokens.json", []byte(`{"tokens":[`+
		`{"name":"reader","sha256":"`+sum("reader-token")+`","readOnly":true},`+
		`{"name":"noexec","sha256":"`+sum("noexec-token")+`","exec":false},`+
		`{"name":"writer","sha256":"`+sum("writer-token")+`"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tokens := new(atomic.Pointer[httpguard.TokenSet])
	tokens.Store(set)
	h := s.Handler(admit.Rules{Guard: httpguard.New(httpguard.Options{AuthToken: "s3cret"}), Token: httpguard.NewTokens("s3cret", tokens)})
	get := func(target, token, accept string) string {
		t.Helper()
		req := httptest.NewRequest("GET", "http://127.0.0.1:8000"+target, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s as %s: %d %s", target, token, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	readPage := s.Tools()[0].Handler
	for _, token := range []string{"reader-token", "noexec-token"} {
		if body := get("/w", token, ""); !strings.Contains(body, NotRunNotice) || strings.Contains(body, "evaluated\n") {
			t.Errorf("GET /w as %s:\n%s", token, body)
		}
		if body := get("/", token, "text/html"); strings.Contains(body, "```component") && !strings.Contains(body, "component not run") {
			t.Errorf("the overview as %s:\n%.300s", token, body)
		}
	}
	for _, c := range []registry.Call{{ReadOnly: true}, {NoExec: true}} {
		c.Args = json.RawMessage(`{"path":"w.md"}`)
		res := readPage(context.Background(), c)
		if txt := res.Content[0].(*mcp.TextContent).Text; res.IsError || !strings.Contains(txt, NotRunNotice) {
			t.Errorf("read_page as %+v: %s", c, txt)
		}
	}
	for _, mark := range []string{"ran-w", "ran-front"} {
		if _, err := os.Stat(filepath.Join(root, mark)); err == nil {
			t.Fatalf("a reader that may not run commands ran a component (%s)", mark)
		}
	}
	if body := get("/w", "writer-token", ""); !strings.Contains(body, "evaluated\n") {
		t.Errorf("GET /w with a token that runs commands:\n%s", body)
	}
	if _, err := os.Stat(filepath.Join(root, "ran-w")); err != nil {
		t.Errorf("the writer's GET ran no component: %v", err)
	}
}

// TestAttackSlowBody: the site's handler behind the body deadline every
// server of the project applies (admit.BodyDeadline, as `site serve` and
// the daemon compose it), shortened here to 300 ms. A POST that declares
// a body and sends part of it is answered once the deadline has passed and
// its connection closed: 408 when admitted, and the refusal when not (401
// without the token: net/http reads an unread body before it answers, so
// the refusal too waits for it). A client cannot hold connections by never
// finishing a body, and a command that runs longer than the deadline after
// its body arrived is not cut short.
func TestAttackSlowBody(t *testing.T) {
	const deadline = 300 * time.Millisecond
	s, root := exampleSite(t, nil)
	writePage(t, root, "slow.md", "---\ntools:\n  - [sleep, {}]\n---\n")
	locked := admit.BodyDeadline(s.Handler(admit.Rules{Guard: httpguard.New(httpguard.Options{AuthToken: "s3cret"}), Token: httpguard.NewToken("s3cret")}), deadline)
	admitted := admit.BodyDeadline(serve(s), deadline)
	for _, tc := range []struct {
		name   string
		h      http.Handler
		status int
	}{{"admitted", admitted, http.StatusRequestTimeout}, {"without the token", locked, http.StatusUnauthorized}} {
		srv := httptest.NewServer(tc.h)
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"com", srv.Listener.Addr())
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a bound for a hung test, not a timing assertion
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Errorf("%s: no answer to a stalled body: %v", tc.name, err)
		} else {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Errorf("%s: a stalled body: %d", tc.name, res.StatusCode)
			}
			if _, err := br.ReadByte(); err == nil {
				t.Errorf("%s: the connection stayed open after a stalled body", tc.name)
			}
		}
		c.Close()
		srv.Close()
	}
	// Once the body is in, the deadline cuts nothing: a command of 1 s,
	// past the 300 ms, runs to its end.
	srv := httptest.NewServer(admitted)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/slow", "application/json", strings.NewReader(`{"command":["sleep","1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"returncode":0`) {
		t.Errorf("a command longer than the body timeout: %d %s", resp.StatusCode, b)
	}
}

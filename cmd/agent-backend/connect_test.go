package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// connectLine is the value of claude_code= in the start-up line "connect
// your agent" (text log), unquoted; "" until it is logged.
func connectLine(log string) string {
	m := regexp.MustCompile(`msg="connect your agent" claude_code=("(?:[^"\\]|\\.)*")`).FindStringSubmatch(log)
	if m == nil {
		return ""
	}
	s, err := strconv.Unquote(m[1])
	if err != nil {
		return ""
	}
	return s
}

// pasteClaudeCode runs cmd in sh, as a user pastes it, with a stub
// `claude` first on PATH that prints its arguments one a line, and
// returns them.
func pasteClaudeCode(t *testing.T, cmd string, env []string) []string {
	t.Helper()
	bin := t.TempDir()
	stub := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n"
	if err := os.WriteFile(filepath.Join(bin, "claude"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", cmd)
	sh.Env = append([]string{"PATH=" + bin + ":" + os.Getenv("PATH")}, env...)
	out, err := sh.CombinedOutput()
	if err != nil {
		t.Fatalf("pasting %q: %v\n%s", cmd, err, out)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
}

// TestConnectLine: the daemon's start-up line names the Claude Code
// command for the address and the token source in use (none, a token
// file, AGENTBE_AUTH_TOKEN, AUTH_TOKEN), never the token's value; pasted
// into a shell with the same file or variable, the command's URL and
// header are accepted by the daemon's /mcp.
func TestConnectLine(t *testing.T) {
	const secret = "s3cret-token-value-0123456789"
	tokenFile := filepath.Join(t.TempDir(), "my token") // a space: the path must be quoted
	if err := os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		header string // the --header argument as printed; "" for none
	}{
		{name: "no token"},
		{name: "token file", args: []string{"--auth-token-file", tokenFile},
			header: `Authorization: Bearer $(cat '` + tokenFile + `')`},
		{name: "AGENTBE_AUTH_TOKEN", env: []string{"AGENTBE_AUTH_TOKEN=" + secret},
			header: `Authorization: Bearer $AGENTBE_AUTH_TOKEN`},
		{name: "AUTH_TOKEN", env: []string{"AUTH_TOKEN=" + secret},
			header: `Authorization: Bearer $AUTH_TOKEN`},
		{name: "every address", args: []string{"--bind", "0.0.0.0", "--auth-token-file", tokenFile},
			header: `Authorization: Bearer $(cat '` + tokenFile + `')`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startDaemonEnv(t, tc.env, append([]string{"--root", t.TempDir()}, tc.args...)...)
			waitFor(t, func() bool { return connectLine(p.stderr.String()) != "" })
			got := connectLine(p.stderr.String())
			want := "claude mcp add --transport http agentbe " + p.url + "/mcp"
			if tc.header != "" {
				want += ` --header "` + tc.header + `"`
			}
			if got != want {
				t.Errorf("start-up line\n got %s\nwant %s", got, want)
			}
			if tc.name == "no token" || tc.name == "AGENTBE_AUTH_TOKEN" {
				// README.md's "Connect your agent" shows this line for
				// the default port.
				readme, err := os.ReadFile("../../README.md")
				if err != nil {
					t.Fatal(err)
				}
				onDefault := strings.Replace(got, p.url, "http://127.0.0.1:3001", 1)
				if tc.header != "" {
					onDefault = `--header "` + tc.header + `"`
				}
				if !strings.Contains(string(readme), onDefault) {
					t.Errorf("README.md does not show %s", onDefault)
				}
			}
			if strings.Contains(p.stderr.String(), secret) {
				t.Errorf("the log holds the token's value:\n%s", p.stderr)
			}
			if !strings.Contains(p.stderr.String(), `claude_desktop_cursor="README.md#connect-your-agent`) {
				t.Errorf("the line does not say where the JSON for Claude Desktop and Cursor is:\n%s", p.stderr)
			}

			// Pasted with the same file or variable, the command gives
			// claude the URL and a header /mcp accepts.
			args := pasteClaudeCode(t, got, tc.env)
			wantArgs := []string{"mcp", "add", "--transport", "http", "agentbe", p.url + "/mcp"}
			if tc.header != "" {
				wantArgs = append(wantArgs, "--header", "Authorization: Bearer "+secret)
			}
			if fmt.Sprint(args) != fmt.Sprint(wantArgs) {
				t.Fatalf("claude got %q, want %q", args, wantArgs)
			}
			req, _ := http.NewRequest(http.MethodPost, args[5], strings.NewReader(
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if len(args) == 8 {
				name, value, _ := strings.Cut(args[7], ": ")
				req.Header.Set(name, value)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"serverInfo"`) {
				t.Errorf("initialize with the pasted URL and header: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestConnectBlockOnTerminal: with stderr a terminal, the daemon also
// writes the command as a plain block (no log quoting) that pastes as it
// reads; with a pipe (TestConnectLine) it writes the log line only.
func TestConnectBlockOnTerminal(t *testing.T) {
	port := freePort(t)
	cmd := exec.Command(binary, "daemon", "--root", t.TempDir(), "--port", strconv.Itoa(port), "--isolation", "software",
		"--ssh-host-key", filepath.Join(t.TempDir(), "hostkey"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AGENTBE_AUTH_TOKEN=block-secret"}
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var out syncbuf.Buffer
	go io.Copy(&out, tty)
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	want := fmt.Sprintf(`claude mcp add --transport http agentbe http://127.0.0.1:%d/mcp --header "Authorization: Bearer $AGENTBE_AUTH_TOKEN"`, port)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "\n    "+want+"\r\n") {
		if time.Now().After(deadline) {
			t.Fatalf("no plain block with %q on the terminal:\n%s", want, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "Claude Desktop, Cursor: the JSON in README.md#connect-your-agent") {
		t.Errorf("the block does not say where the JSON is:\n%s", out.String())
	}
	if strings.Contains(out.String(), "block-secret") {
		t.Errorf("the terminal shows the token's value:\n%s", out.String())
	}
}

// TestReadmeConnectJSON: the JSON blocks of README.md's "Connect your
// agent" are the example files examples/clients/clients_test.go runs
// against the daemon (Claude Desktop's, then Cursor's), so the README
// cannot drift from what is tested.
func TestReadmeConnectJSON(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Connect your agent\n")
	if !ok {
		t.Fatal(`README.md has no "## Connect your agent" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(section, -1)
	files := []string{"claude_desktop_config.json", ".cursor/mcp.json"}
	if len(blocks) != len(files) {
		t.Fatalf("%d JSON blocks in the section, want %d (%v)", len(blocks), len(files), files)
	}
	for i, f := range files {
		want, err := os.ReadFile(filepath.Join("../../examples/clients", f))
		if err != nil {
			t.Fatal(err)
		}
		var got, w any
		if err := json.Unmarshal([]byte(blocks[i][1]), &got); err != nil {
			t.Fatalf("README block %d: %v", i, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("README block %d differs from examples/clients/%s:\n%s\nwant\n%s", i, f, blocks[i][1], want)
		}
	}
}

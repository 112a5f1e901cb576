package upstream

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseConfigDefaultsAndExpansion(t *testing.T) {
	cfg, err := ParseConfig("mcp.json", []byte(`{"servers":[
		{"name":"fs","command":"npx","args":["-y","@modelcontextprotocol/server-filesystem","${WS}","$$literal","$HOME"],
		 "env":{"TOKEN":"${TOK}"},"timeout":30,"passEnv":["PATH"]},
		{"name":"everything","command":"/usr/bin/x","timeout":"1m30s","cwd":"./sub/../tools/","allow":["read_*"],"block":["read_secret"],
		 "restart":{"policy":"always","maxRetries":2},"cache":{"ttl":5},"maxConcurrent":8,"network":true,"readOnly":["/opt/x"],"disabled":true}
	]}`), env(map[string]string{"WS": "/work/ws", "TOK": "t0k"}))
	if err != nil {
		t.Fatal(err)
	}
	fs, ev := cfg.Servers[0], cfg.Servers[1]
	if got := strings.Join(fs.Args, " "); got != "-y @modelcontextprotocol/server-filesystem /work/ws $literal $HOME" {
		t.Errorf("args expanded to %q", got)
	}
	if fs.Env["TOKEN"] != "t0k" || fs.PassEnv[0] != "PATH" {
		t.Errorf("env %v passEnv %v", fs.Env, fs.PassEnv)
	}
	if fs.Timeout != Duration(30*time.Second) || ev.Timeout != Duration(90*time.Second) {
		t.Errorf("timeouts %v %v", time.Duration(fs.Timeout), time.Duration(ev.Timeout))
	}
	if fs.MaxConcurrent != DefaultMaxConcurrent || fs.Restart.Policy != RestartOnFailure || fs.Restart.MaxRetries != DefaultMaxRestarts || fs.Cache.TTL != 0 {
		t.Errorf("defaults not applied: %+v", fs)
	}
	if ev.Cwd != "tools" || ev.MaxConcurrent != 8 || ev.Restart.Policy != RestartAlways || ev.Restart.MaxRetries != 2 ||
		ev.Cache.TTL != Duration(5*time.Second) || ev.Cache.MaxEntries != 1000 || !ev.Network || !ev.Disabled || ev.ReadOnly[0] != "/opt/x" {
		t.Errorf("second server: %+v", ev)
	}
	for tool, want := range map[string]bool{"read_file": true, "read_secret": false, "write_file": false} {
		if ev.Keep(tool) != want {
			t.Errorf("Keep(%q) = %v, want %v", tool, !want, want)
		}
	}
	if !fs.Keep("anything") {
		t.Error("no filter must keep every tool")
	}
}

// TestParseConfigErrors: every bad file gets an error naming the file, the
// server and the key, and saying what to do.
func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"empty", ``, `mcp.json: the file is empty`},
		{"syntax", "{\"servers\":[\n{\"name\":\"a\",}]}", `mcp.json: invalid JSON at line 2, column 13`},
		{"top-level typo", `{"server":[]}`, `mcp.json: unknown key "server" at the top level; did you mean "servers"?`},
		{"top-level stranger", `{"mcpServers":{}}`, `mcp.json: unknown key "mcpServers" at the top level; the file is {"servers":[...]}`},
		{"no servers", `{}`, `mcp.json: "servers": missing`},
		{"trailing", `{"servers":[]} {}`, `mcp.json: unexpected data after the top-level object`},
		{"trailing brace", `{"servers":[]}}`, `mcp.json: unexpected data after the top-level object`},
		{"trailing bracket", `{"servers":[]}]`, `mcp.json: unexpected data after the top-level object`},
		{"servers not array", `{"servers":{}}`, `mcp.json: "servers" must be an array`},
		{"key typo", `{"servers":[{"name":"a","comand":"x"}]}`, `mcp.json: servers[0] ("a"): "comand": unknown key; did you mean "command"?`},
		{"key case", `{"servers":[{"name":"a","command":"x","pass_env":[]}]}`, `mcp.json: servers[0] ("a"): "pass_env": unknown key; did you mean "passEnv"?`},
		{"unknown key", `{"servers":[{"name":"a","command":"x","zzz":1}]}`, `"zzz": unknown key; the keys are name, command, args`},
		{"wrong type", `{"servers":[{"name":"a","command":"x","args":"-y"}]}`, `servers[0] ("a"): "args": must be an array, not a JSON string`},
		{"wrong nested type", `{"servers":[{"name":"a","command":"x","restart":{"maxRetries":"3"}}]}`, `servers[0] ("a"): "restart.maxRetries": must be a number, not a JSON string`},
		{"bad timeout", `{"servers":[{"name":"a","command":"x","timeout":"soon"}]}`, `servers[0] ("a"): "timeout": "soon" is not a duration`},
		{"negative timeout", `{"servers":[{"name":"a","command":"x","timeout":-1}]}`, `servers[0] ("a"): "timeout": -1 is not a valid number of seconds`},
		{"bad ttl", `{"servers":[{"name":"a","command":"x","cache":{"ttl":true}}]}`, `servers[0] ("a"): "cache.ttl": want seconds`},
		{"no name", `{"servers":[{"command":"x"}]}`, `servers[0]: "name": missing`},
		{"bad name", `{"servers":[{"name":"a b","command":"x"}]}`, `servers[0] ("a b"): "name": "a b" has characters other than`},
		{"double underscore", `{"servers":[{"name":"a__b","command":"x"}]}`, `"name": "a__b" contains "__"`},
		{"long name", `{"servers":[{"name":"` + strings.Repeat("a", 33) + `","command":"x"}]}`, `"name": 33 characters long; the limit is 32`},
		{"duplicate", `{"servers":[{"name":"a","command":"x"},{"name":"a","command":"y"}]}`, `servers[1] ("a"): "name": servers[0] has the same name`},
		{"no command", `{"servers":[{"name":"a"}]}`, `servers[0] ("a"): "command": missing`},
		{"unset var", `{"servers":[{"name":"a","command":"x","args":["${NOPE}"]}]}`, `servers[0] ("a"): "args[0]": ${NOPE} is not set in the daemon's environment`},
		{"unset var in env", `{"servers":[{"name":"a","command":"x","env":{"K":"${NOPE}"}}]}`, `"env.K": ${NOPE} is not set`},
		{"bad var", `{"servers":[{"name":"a","command":"${A-B}"}]}`, `"command": ${A-B}: not a variable name`},
		{"unterminated", `{"servers":[{"name":"a","command":"${A"}]}`, `"command": unterminated ${`},
		{"bad env name", `{"servers":[{"name":"a","command":"x","env":{"1X":"v"}}]}`, `"env.1X": not a variable name`},
		{"bad passEnv", `{"servers":[{"name":"a","command":"x","passEnv":["A=B"]}]}`, `"passEnv[0]": "A=B" is not a variable name`},
		{"cwd escapes", `{"servers":[{"name":"a","command":"x","cwd":"../up"}]}`, `"cwd": "../up" must be a relative path inside the workspace`},
		{"cwd absolute", `{"servers":[{"name":"a","command":"x","cwd":"/etc"}]}`, `"cwd": "/etc" must be a relative path`},
		{"readOnly relative", `{"servers":[{"name":"a","command":"x","readOnly":["opt"]}]}`, `"readOnly[0]": "opt" must be an absolute host path`},
		{"bad pattern", `{"servers":[{"name":"a","command":"x","allow":["[a"]}]}`, `"allow[0]": "[a" is not a valid pattern`},
		{"bad policy", `{"servers":[{"name":"a","command":"x","restart":{"policy":"sometimes"}}]}`, `"restart.policy": "sometimes" is not a policy; use "on-failure", "always" or "never"`},
		{"negative retries", `{"servers":[{"name":"a","command":"x","restart":{"maxRetries":-1}}]}`, `"restart.maxRetries": -1 is negative`},
		{"negative concurrency", `{"servers":[{"name":"a","command":"x","maxConcurrent":-2}]}`, `"maxConcurrent": -2 is negative`},
		{"NUL in arg", `{"servers":[{"name":"a","command":"x","args":["a\u0000b"]}]}`, `"args[0]": contains a NUL byte`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("mcp.json", []byte(tc.file), env(map[string]string{"A": "1"}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "mcp.json: ") {
				t.Errorf("error does not start with the file name: %v", err)
			}
		})
	}
}

func TestLoadConfigFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadConfig(filepath.Join(dir, "missing.json"), env(nil)); err == nil || !strings.Contains(err.Error(), "missing.json: no such file or directory") {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, make([]byte, MaxConfigBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(big, env(nil)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: %v", err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"servers":[{"name":"a","command":"x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := LoadConfig(good, env(nil)); err != nil || cfg.Servers[0].Name != "a" {
		t.Errorf("good file: %+v %v", cfg, err)
	}
}

// FuzzParseConfig: an error names the file; a file taken is one JSON
// value (nothing after it), and has its defaults applied and only valid
// names.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"servers":[{"name":"fs","command":"npx","args":["${A}"],"timeout":"1s","cache":{"ttl":1}}]}`))
	f.Add([]byte(`{"servers":[{"name":"a","command":"$${A}","restart":{"policy":"never"}}]}`))
	f.Add([]byte(`{"servers":[]}`))
	f.Add([]byte(`{"servers":[]}}`))
	f.Add([]byte(`{"servers":[]} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig("f.json", data, env(map[string]string{"A": "x"}))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("took %q, which is not one JSON value", data)
		}
		for _, s := range cfg.Servers {
			if validName(s.Name) != nil || s.Timeout <= 0 || s.MaxConcurrent <= 0 || s.Restart.Policy == "" || s.Restart.MaxRetries <= 0 {
				t.Fatalf("accepted a server without defaults or with a bad name: %+v", s)
			}
		}
	})
}

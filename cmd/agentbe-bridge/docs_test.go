package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestRemoteClientsDoc: every JSON block of docs/remote-clients.md is
// valid JSON in the shape its client reads (mcpServers or servers), each
// server's url is http(s) and ends in /mcp, and each agentbe-bridge entry
// names a subcommand and flags the bridge has, with a URL its subcommand
// accepts. The page configures clients on machines CI cannot run, so what
// can be checked here is checked.
func TestRemoteClientsDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/remote-clients.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) < 4 {
		t.Fatalf("docs/remote-clients.md has %d JSON blocks; want one for each of Claude Desktop (macOS, Windows), Cursor and VS Code", len(blocks))
	}
	bridges := 0
	for i, m := range blocks {
		var doc struct {
			MCPServers map[string]server `json:"mcpServers"`
			Servers    map[string]server `json:"servers"`
			Inputs     []map[string]any  `json:"inputs"`
		}
		dec := json.NewDecoder(strings.NewReader(m[1]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil {
			t.Errorf("JSON block %d: %v\n%s", i+1, err, m[1])
			continue
		}
		all := map[string]server{}
		for k, v := range doc.MCPServers {
			all[k] = v
		}
		for k, v := range doc.Servers {
			all[k] = v
		}
		if len(all) == 0 {
			t.Errorf("JSON block %d configures no server", i+1)
		}
		for name, s := range all {
			switch {
			case s.URL != "":
				u, err := url.Parse(s.URL)
				if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.HasSuffix(u.Path, "/mcp") {
					t.Errorf("JSON block %d, %s: url %q is not http(s)://…/mcp", i+1, name, s.URL)
				}
				if !strings.HasPrefix(s.Headers["Authorization"], "Bearer ") {
					t.Errorf("JSON block %d, %s: no bearer token header", i+1, name)
				}
			case isBridge(s.Command):
				bridges++
				checkBridgeArgs(t, fmt.Sprintf("JSON block %d, %s", i+1, name), s.Args)
			default:
				t.Errorf("JSON block %d, %s: neither a url nor agentbe-bridge (%q)", i+1, name, s.Command)
			}
		}
	}
	if bridges < 2 {
		t.Errorf("%d agentbe-bridge entries; want Claude Desktop's for macOS and Windows", bridges)
	}
}

// TestBridgeCommandsInDocs: every `agentbe-bridge …` command of the
// Markdown (README.md, docs/*.md; fenced blocks and inline code) names a
// subcommand and flags the bridge has.
func TestBridgeCommandsInDocs(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../../README.md")
	cmdRE := regexp.MustCompile(`agentbe-bridge (mcp|ssh)\b([^'` + "`" + `\n|;&)]*)`)
	n := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for ln, line := range strings.Split(string(b), "\n") {
			for _, m := range cmdRE.FindAllStringSubmatch(line, -1) {
				n++
				args := append([]string{m[1]}, strings.Fields(strings.NewReplacer("[", " ", "]", " ").Replace(m[2]))...)
				checkBridgeArgs(t, filepath.Base(doc)+":"+strconv.Itoa(ln+1), args)
			}
		}
	}
	if n == 0 {
		t.Fatal("no agentbe-bridge command found in the docs")
	}
}

type server struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

func isBridge(command string) bool {
	base := command[strings.LastIndexAny(command, `/\`)+1:]
	return strings.TrimSuffix(base, ".exe") == "agentbe-bridge"
}

// checkBridgeArgs parses args (after the program name) with the bridge's
// own command tree: the subcommand must exist, every flag must be one it
// has, and a concrete URL must be one it accepts. Placeholders in capitals
// (URL, F, FILE) stand for values and are not parsed as URLs.
func checkBridgeArgs(t *testing.T, where string, args []string) {
	t.Helper()
	root := newRoot(strings.NewReader(""), io.Discard, io.Discard)
	sub, rest, err := root.Find(args)
	if err != nil || sub == root {
		t.Errorf("%s: agentbe-bridge %s: no such subcommand", where, strings.Join(args, " "))
		return
	}
	for _, a := range rest {
		if name, ok := strings.CutPrefix(a, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			if sub.Flags().Lookup(name) == nil {
				t.Errorf("%s: agentbe-bridge %s: %s has no flag --%s", where, strings.Join(args, " "), sub.Name(), name)
			}
		}
	}
	if err := sub.ParseFlags(rest); err != nil {
		t.Errorf("%s: agentbe-bridge %s: %v", where, strings.Join(args, " "), err)
		return
	}
	pos := sub.Flags().Args()
	if len(pos) == 1 && strings.Contains(pos[0], "://") {
		if err := sub.Args(sub, pos); err != nil {
			t.Errorf("%s: agentbe-bridge %s: %v", where, strings.Join(args, " "), err)
		}
	}
}

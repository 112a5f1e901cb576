package upstream

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
	"github.com/agentbe/agentbe-daemon/sandbox"
)

// echoServerJS is a complete MCP server over stdio with no dependencies:
// the package a loopback npm registry serves to npx.
const echoServerJS = `#!/usr/bin/env node
const rl = require('readline').createInterface({ input: process.stdin });
const send = (m) => process.stdout.write(JSON.stringify(m) + '\n');
rl.on('line', (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  switch (m.method) {
    case 'initialize':
      return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion,
        capabilities: { tools: {} }, serverInfo: { name: 'npx-echo', version: '1.0.0' } } });
    case 'tools/list':
      return send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'echo',
        inputSchema: { type: 'object', properties: { text: { type: 'string' } } } }] } });
    case 'tools/call':
      return send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text',
        text: 'npx says ' + m.params.arguments.text } ] } });
    default:
      return send({ jsonrpc: '2.0', id: m.id, result: {} });
  }
});
`

// npmRegistry serves one package, name@1.0.0, from a loopback address, as
// the npm registry does (packument and tarball). It counts the requests.
func npmRegistry(t *testing.T, name string) (url string, requests func() int, stop func()) {
	t.Helper()
	var tgz bytes.Buffer
	gz := gzip.NewWriter(&tgz)
	tw := tar.NewWriter(gz)
	pkg, _ := json.Marshal(map[string]any{"name": name, "version": "1.0.0", "bin": map[string]string{name: "server.js"}})
	for _, f := range []struct {
		name string
		data []byte
		mode int64
	}{{"package/package.json", pkg, 0o644}, {"package/server.js", []byte(echoServerJS), 0o755}} {
		tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg})
		tw.Write(f.data)
	}
	tw.Close()
	gz.Close()
	sum512 := sha512.Sum512(tgz.Bytes())
	sum1 := sha1.Sum(tgz.Bytes())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url = "http://" + ln.Addr().String() + "/"
	var n int
	var mu = make(chan struct{}, 1)
	mu <- struct{}{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-mu
		n++
		mu <- struct{}{}
		switch r.URL.Path {
		case "/" + name:
			json.NewEncoder(w).Encode(map[string]any{
				"name": name, "dist-tags": map[string]string{"latest": "1.0.0"},
				"versions": map[string]any{"1.0.0": map[string]any{
					"name": name, "version": "1.0.0", "bin": map[string]string{name: "server.js"},
					"dist": map[string]string{
						"tarball":   url + name + "/-/" + name + "-1.0.0.tgz",
						"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum512[:]),
						"shasum":    hex.EncodeToString(sum1[:]),
					}}}})
		case "/" + name + "/-/" + name + "-1.0.0.tgz":
			w.Write(tgz.Bytes())
		default:
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(ln)
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			srv.Close()
		}
	}
	t.Cleanup(stop)
	return url, func() int { <-mu; defer func() { mu <- struct{}{} }(); return n }, stop
}

// TestNpxLaunch: a server launched as `npx -y package@version` (its
// package fetched from a loopback registry the test serves) starts in each
// isolation mode, with its package cached in its own cache directory
// outside the workspace; killed after the registry is gone, it restarts
// from that cache.
func TestNpxLaunch(t *testing.T) {
	testenv.Command(t, "npm", "npx")
	for _, iso := range []sandbox.Mode{sandbox.ModeBwrap, sandbox.ModeLandlock, sandbox.ModeSoftware} {
		t.Run(string(iso), func(t *testing.T) {
			const pkg = "agentbe-npx-echo"
			url, requests, stopRegistry := npmRegistry(t, pkg)
			tm := fastTiming
			tm.startTimeout = 60 * time.Second
			f := start(t, "", iso, func(s *Server) {
				s.Command = "npx"
				s.Args = []string{"-y", pkg + "@1.0.0"}
				s.Env["npm_config_registry"] = url
				s.Network = true
				s.Block = nil
			}, tm)
			first := f.running(t)
			if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"hi"}`); isErr || txt != "npx says hi" {
				t.Fatalf("t__echo: %q %v", txt, isErr)
			}
			if requests() == 0 {
				t.Fatal("npx never asked the test's registry")
			}
			cache := filepath.Join(f.p.cacheRoot, "t", "npm", "_npx")
			if ents, err := os.ReadDir(cache); err != nil || len(ents) == 0 {
				t.Fatalf("no npx cache in %s: %v", cache, err)
			}
			if ents, _ := os.ReadDir(f.root); len(ents) != 0 {
				t.Errorf("npx left files in the workspace: %v", ents)
			}
			// The registry goes away; the server is killed and comes back
			// from its cache.
			stopRegistry()
			if err := syscall.Kill(first.PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			second := f.waitFor(t, "a restart", func(h Health) bool { return h.State == StateRunning && h.PID != first.PID })
			// npx from its cache may itself be replaced once more while
			// the killed one's files settle on a loaded machine: wait
			// until one process has stayed up for a second.
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
				time.Sleep(time.Second)
				h := f.health(t)
				if h.State == StateRunning && h.PID == second.PID {
					break
				}
				t.Logf("the server was replaced again after the restart: %+v", h)
				second = f.waitFor(t, "a running server", func(h Health) bool { return h.State == StateRunning })
			}
			if txt, isErr, _ := f.call(t, nil, "t__echo", `{"text":"again"}`); isErr || txt != "npx says again" {
				t.Fatalf("after the restart: %q %v", txt, isErr)
			}
		})
	}
}

// TestPackageCacheOutsideTheWorkspace: a cache directory in (or holding)
// the workspace is refused at start.
func TestPackageCacheOutsideTheWorkspace(t *testing.T) {
	ws := t.TempDir()
	for _, dir := range []string{filepath.Join(ws, "cache"), ws, filepath.Dir(ws)} {
		if _, err := packageCacheRoot(dir, ws); err == nil || !strings.Contains(err.Error(), "overlaps the workspace") {
			t.Errorf("%s: %v", dir, err)
		}
	}
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(ws, link)
	if _, err := packageCacheRoot(link, ws); err == nil {
		t.Error("a symlink to the workspace was accepted")
	}
	if got, err := packageCacheRoot(filepath.Join(t.TempDir(), "c"), ws); err != nil {
		t.Errorf("a directory outside: %v", err)
	} else if fi, _ := os.Stat(got); fi.Mode().Perm() != 0o700 {
		t.Errorf("mode %v, want 0700", fi.Mode())
	}
}

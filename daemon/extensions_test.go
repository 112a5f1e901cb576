package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// TestExtensionsOnDaemon: --extensions serves the example extensions on the
// REST face, and /health lists each file with its state.
func TestExtensionsOnDaemon(t *testing.T) {
	c := testConfig(t)
	c.Extensions = t.TempDir()
	if err := os.CopyFS(c.Extensions, os.DirFS("../examples/extensions")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.Extensions+"/broken.star", []byte("def describe_extension(:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r := start(t, c, nil)
	resp, err := http.Post(r.url+"/execute", "application/json", strings.NewReader(`{"tool_name":"textstats__stats","arguments":{"text":"b a b"}}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `{\"distinct\":2,\"top\":[{\"count\":2,\"word\":\"b\"}`) {
		t.Errorf("textstats__stats: %d %s", resp.StatusCode, body)
	}
	_, hb := get(t, r.url+"/health")
	var h struct {
		Extensions []struct {
			File, State string
			LastError   string `json:"last_error"`
		}
	}
	if err := json.Unmarshal(hb, &h); err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, e := range h.Extensions {
		states[e.File] = e.State
	}
	if states["notes.star"] != "ready" || states["sqlite_explorer.star"] != "ready" || states["broken.star"] != "failed" || len(h.Extensions) != 6 || !strings.Contains(string(hb), `"last_error":"broken.star:1: `) {
		t.Errorf("/health extensions: %s", hb)
	}
}

// TestExtensionsOnDaemonFromAConfigMap: --extensions naming a ConfigMap
// volume (each file a symlink through ..data into a timestamped
// directory, the mount point 1777) passes --check-config and serves on
// the REST face; an update of the ConfigMap (a new timestamped directory,
// ..data swapped) is served without a restart, and a key it drops
// withdraws its tools.
func TestExtensionsOnDaemonFromAConfigMap(t *testing.T) {
	ext := func(name, answer string) string {
		return "def h(p):\n    return '" + answer + "'\ndef describe_extension():\n    return Extension(name='" + name + "', tools=[Tool(name='t', handler=h)])\n"
	}
	c := testConfig(t)
	c.Extensions = filepath.Join(t.TempDir(), "extensions")
	testenv.ConfigMapVolume(t, c.Extensions, map[string]string{"cm.star": ext("cm", "v1"), "dropped.star": ext("dropped", "here")})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if errs := Check(c); len(errs) != 0 {
		t.Fatalf("--check-config of a ConfigMap volume: %v", errs)
	}
	r := start(t, c, nil)
	call := func(tool string) string {
		resp, err := http.Post(r.url+"/execute", "application/json", strings.NewReader(`{"tool_name":"`+tool+`","arguments":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(body)
	}
	if got := call("cm__t"); !strings.Contains(got, `"v1"`) {
		t.Fatalf("cm__t from the ConfigMap: %s", got)
	}
	if got := call("dropped__t"); !strings.Contains(got, `"here"`) {
		t.Fatalf("dropped__t from the ConfigMap: %s", got)
	}
	testenv.ConfigMapUpdate(t, c.Extensions, map[string]string{"cm.star": ext("cm", "v2")})
	waitFor(t, "v2 after the ..data swap", func() bool { return strings.Contains(call("cm__t"), `"v2"`) })
	waitFor(t, "dropped__t withdrawn", func() bool { return !strings.Contains(call("dropped__t"), `"here"`) })
}

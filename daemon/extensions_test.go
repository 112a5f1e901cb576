package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
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

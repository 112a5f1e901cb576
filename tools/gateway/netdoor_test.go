package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// TestAttackDownloadDestinations: http.download writes only into the
// workspace, through fsops: a climb, a directory link and a file link that
// lead outside are refused, an absolute path names a file of the
// workspace, a FIFO planted at the destination is replaced without being
// opened, and the outside is untouched; a refused URL writes nothing. A read-only token calls neither
// HTTP tool, and the server is not reached.
func TestAttackDownloadDestinations(t *testing.T) {
	var hits atomic.Int32
	srv, net := allowServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("payload"))
	}))
	f := setup(t, func(o *Options) { o.Net = net })
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("original"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.root, "outdir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(f.root, "victim.bin")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(f.root, "fifo.bin"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{"../escape.bin", "outdir/new.bin", "outdir/victim", "victim.bin"} {
		if txt, isErr, code := f.call(t, "http.download", `{"url":"`+srv.URL+`/x","destPath":`+quote(dest)+`}`); !isErr || code != errcode.PathEscapeAttempt {
			t.Errorf("%s: %s %s; want PATH_ESCAPE_ATTEMPT", dest, code, txt)
		}
	}
	// An absolute path names a file of the workspace (fsops's rule).
	abs := filepath.Join(outside, "abs.bin")
	if txt, isErr, _ := f.call(t, "http.download", `{"url":"`+srv.URL+`/x","destPath":`+quote(abs)+`}`); isErr {
		t.Errorf("%s: %s", abs, txt)
	}
	if b, err := os.ReadFile(filepath.Join(f.root, abs)); err != nil || string(b) != "payload" {
		t.Errorf("the absolute path was not written inside the workspace: %q %v", b, err)
	}
	// A FIFO at the destination is replaced by the renamed file, never
	// opened (the call would block).
	if txt, isErr, _ := f.call(t, "http.download", `{"url":"`+srv.URL+`/x","destPath":"fifo.bin"}`); isErr {
		t.Errorf("fifo.bin: %s", txt)
	}
	if fi, err := os.Lstat(filepath.Join(f.root, "fifo.bin")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("fifo.bin: %v %v; want the downloaded regular file", fi, err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "original" {
		t.Errorf("the file outside was changed: %q", b)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("the directory outside holds %d entries; want only the victim", len(entries))
	}
	before := hits.Load()
	if _, isErr, _ := f.call(t, "http.download", `{"url":"http://127.0.0.2/","destPath":"refused.bin"}`); !isErr {
		t.Errorf("a refused address was downloaded")
	}
	if _, err := os.Stat(filepath.Join(f.root, "refused.bin")); err == nil {
		t.Errorf("a refused download left a file")
	}
	for _, tool := range []string{"http.request", "http.download"} {
		res, err := f.reg.Call(context.Background(), tool, registry.Call{Args: json.RawMessage(`{"url":"` + srv.URL + `/ro","destPath":"ro.bin"}`), Workspace: f.ws, ReadOnly: true})
		if err == nil && !res.IsError {
			t.Errorf("%s for a read-only token: served", tool)
		}
	}
	if hits.Load() != before {
		t.Errorf("the server was reached %d more times by refused calls", hits.Load()-before)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return strings.TrimSpace(string(b))
}

// TestAttackClientCannotLoosenTheDoor: the door's loosenings are the
// operator's flags; a client that sends them as arguments is refused
// (unknown fields), and a Host header or a query does not change where a
// request goes: a loopback server stays unreached under the default door.
func TestAttackClientCannotLoosenTheDoor(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	f := setup(t, nil) // the strict default door
	for _, args := range []string{
		`{"url":"` + srv.URL + `/","allowPrivate":true}`,
		`{"url":"` + srv.URL + `/","allowHosts":["127.0.0.1"]}`,
		`{"url":"` + srv.URL + `/","allowPorts":[1]}`,
		`{"url":"` + srv.URL + `/","proxy":"http://127.0.0.1:1"}`,
		`{"url":"` + srv.URL + `/","AllowPrefixes":["127.0.0.0/8"]}`,
	} {
		if _, isErr, code := f.call(t, "http.request", args); !isErr || code != errcode.InvalidArgument {
			t.Errorf("%s: %s; want INVALID_ARGUMENT", args, code)
		}
	}
	for _, args := range []string{
		`{"url":"` + srv.URL + `/","headers":{"Host":"example.com"}}`,
		`{"url":"` + srv.URL + `/","query":{"url":"https://example.com/"}}`,
		`{"url":"http://example.com@` + strings.TrimPrefix(srv.URL, "http://") + `/"}`,
		`{"url":"` + srv.URL + `/","method":"CONNECT"}`,
	} {
		if txt, isErr, _ := f.call(t, "http.request", args); !isErr || !strings.Contains(txt, "refused") {
			t.Errorf("%s: %s; want a refusal", args, txt)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server was reached %d times", n)
	}
}

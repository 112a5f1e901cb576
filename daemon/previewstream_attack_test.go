package daemon

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttackRevokedTokenEndsPreviewStream: a streamed answer through
// /preview/ (no length: a dev server's event stream, a log tail) is held
// for its token as a WebSocket is. A reload that removes the token ends
// it, on the lean path (GET) and on ReverseProxy's (a request with a
// body), while the same stream of a token the reload kept runs on.
func TestAttackRevokedTokenEndsPreviewStream(t *testing.T) {
	r, port, removeAlice := previewRevocationDaemon(t)

	// open starts an endless answer (previewsrv's /forever) and reads
	// its first 64 KiB.
	open := func(token, method string) io.ReadCloser {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader("x") // a body: ReverseProxy's path
		}
		req, err := http.NewRequest(method, fmt.Sprintf("%s/preview/%d/forever", r.url, port), body)
		must(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		must(t, err)
		t.Cleanup(func() { res.Body.Close() })
		if res.StatusCode != http.StatusOK || res.ContentLength != -1 {
			t.Fatalf("%s %s: %d, length %d, want a streamed 200", token, method, res.StatusCode, res.ContentLength)
		}
		if _, err := io.ReadFull(res.Body, make([]byte, 64<<10)); err != nil {
			t.Fatalf("%s %s: %v", token, method, err)
		}
		return res.Body
	}
	streams := map[string]io.ReadCloser{}
	for _, tok := range []string{"alice-token", "bob-token"} {
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			streams[tok+" "+m] = open(tok, m)
		}
	}
	removeAlice()
	// Every stream is read at once: one left unread for 30 s would be
	// cut by the reply's stall bound (admit.ReplyStallTimeout), not by
	// the reload. What was under way before the reload may still come:
	// each reads on up to far more than the buffers on the way hold.
	type result struct {
		name string
		err  error
	}
	ended := make(chan result, len(streams))
	for name, s := range streams {
		go func() {
			n, err := io.CopyN(io.Discard, s, 64<<20)
			if err == nil {
				err = fmt.Errorf("read %d bytes and the stream goes on", n)
			}
			ended <- result{name, err}
		}()
	}
	guard := time.After(2 * time.Minute) // a hang guard, not a figure
	for range streams {
		select {
		case r := <-ended:
			goesOn := strings.Contains(r.err.Error(), "goes on")
			if strings.HasPrefix(r.name, "bob") && !goesOn {
				t.Errorf("%s: the stream of a token the reload kept ended: %v", r.name, r.err)
			}
			if strings.HasPrefix(r.name, "alice") && goesOn {
				t.Errorf("%s: the stream of a removed token goes on: %v", r.name, r.err)
			}
		case <-guard:
			for _, s := range streams {
				s.Close()
			}
			t.Fatal("a stream was still being read 2 minutes after the reload")
		}
	}
}

// previewRevocationDaemon starts a daemon (software isolation, previews
// on) with the tokens alice and bob, both bound to scope a, and a preview
// server (previewsrv) in a started by alice; removeAlice rewrites the
// token file without her and reloads it as SIGHUP does.
func previewRevocationDaemon(t *testing.T) (r *running, port int, removeAlice func()) {
	t.Helper()
	c := previewConfig(t, "software", true)
	must(t, os.MkdirAll(filepath.Join(c.Root, "a"), 0o755))
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	alice := tokenLine("alice", "alice-token", `,"scope":"a"`)
	bob := tokenLine("bob", "bob-token", `,"scope":"a"`)
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+alice+`,`+bob+`]}`), 0o600))
	c.TokensFile = tokens
	must(t, c.Validate())
	r = start(t, c, nil)
	port = startPreviewServerAs(t, r, filepath.Join(c.Root, "a"), bearer("alice-token"))
	return r, port, func() {
		t.Helper()
		must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+bob+`]}`), 0o600))
		if _, err := r.d.ReloadTokens(); err != nil {
			t.Fatal(err)
		}
	}
}

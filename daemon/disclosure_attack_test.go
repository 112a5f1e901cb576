package daemon

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// healthAs asks /health with the headers of hdr and returns its body.
func healthAs(t *testing.T, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/health", nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func jsonKeys(t *testing.T, body string) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("not JSON: %v: %s", err, body)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// livenessKeys are what /health tells a caller the daemon would not admit:
// the fields docs/protocol.md requires of an unauthenticated /health, and
// (with --upstreams) the servers' states by name, as /health/servers.
var livenessKeys = []string{"rootDir", "status", "transports", "version"}

// TestAttackHealthTellsStrangersOnlyLiveness: /health answers every
// caller (a probe needs no token), but only a caller the daemon would
// admit with its full token (or the operator's) gets more than the
// protocol's liveness fields. A stranger without a token, with a wrong
// one, with a token bound to a scope or read-only, a DNS-rebinding page
// (a foreign Origin, or a foreign Host on a daemon without a token) gets
// status, version, rootDir and transports: not an upstream server's
// stderr (which may print a secret), its pid, the operator's file paths,
// the isolation mode's gaps or the providers.
func TestAttackHealthTellsStrangersOnlyLiveness(t *testing.T) {
	c := admissionConfig(t, true, "")
	cfgFile := filepath.Join(t.TempDir(), "mcp_servers.json")
	must(t, os.WriteFile(cfgFile, []byte(`{"servers":[{"name":"leaky","command":"sh","args":["-c","echo 'login failed with API_KEY=sk-hunter2' >&2; exit 3"]}]}`), 0o600))
	c.Upstreams = cfgFile
	c.UpstreamCacheDir = t.TempDir()
	c.Extensions = t.TempDir()
	must(t, os.WriteFile(filepath.Join(c.Extensions, "broken.star"), []byte("def describe_extension(:\n"), 0o600))
	must(t, c.Validate())
	r := start(t, c, nil)

	// The operator's view names the upstream's stderr once it has failed.
	deadline := time.Now().Add(30 * time.Second)
	var full string
	for {
		_, full = healthAs(t, r.url, bearer(admAgent))
		if strings.Contains(full, "sk-hunter2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream's stderr never reached /health: %s", full)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, k := range []string{"isolation", "providers", "upstreams", "extensions", "tools"} {
		if !slices.Contains(jsonKeys(t, full), k) {
			t.Errorf("/health with the token lacks %q: %s", k, full)
		}
	}
	if _, op := healthAs(t, r.url, bearer(admOperator)); !strings.Contains(op, `"upstreams"`) {
		t.Errorf("/health with the operator's token: %s", op)
	}

	for _, tc := range []struct {
		name string
		hdr  map[string]string
	}{
		{"no token", nil},
		{"wrong token", bearer("nope")},
		{"token in the query", nil},
		{"read-only token", bearer("ro-tok")},
		{"scope-bound token", bearer("bound-tok")},
		{"foreign origin with the token", map[string]string{"Authorization": "Bearer " + admAgent, "Origin": "http://evil.example"}},
	} {
		u := r.url
		if tc.name == "token in the query" {
			// /health takes the token from the header only, as /mcp does.
			code, body := get(t, u+"/health?token="+admAgent)
			checkLiveness(t, tc.name, code, string(body), c.Extensions)
			continue
		}
		code, body := healthAs(t, u, tc.hdr)
		checkLiveness(t, tc.name, code, body, c.Extensions)
	}

	// Without a token the daemon admits what passes the Origin and Host
	// rules: a local client sees everything, a rebinding page liveness.
	c2 := testConfig(t)
	r2 := start(t, c2, nil)
	if _, body := healthAs(t, r2.url, nil); !slices.Contains(jsonKeys(t, body), "isolation") {
		t.Errorf("/health without a token set, local client: %s", body)
	}
	code, body := healthAs(t, r2.url, map[string]string{"Host": "rebound.example"})
	checkLiveness(t, "foreign host without a token set", code, body, "")
	code, body = healthAs(t, r2.url, map[string]string{"Origin": "http://evil.example"})
	checkLiveness(t, "foreign origin without a token set", code, body, "")
}

func checkLiveness(t *testing.T, name string, code int, body, secretPath string) {
	t.Helper()
	if code != http.StatusOK {
		t.Errorf("%s: /health answered %d: %s", name, code, body)
	}
	keys := slices.DeleteFunc(jsonKeys(t, body), func(k string) bool { return k == "servers" })
	if !slices.Equal(keys, livenessKeys) {
		t.Errorf("%s: /health told a stranger %v, want %v: %s", name, keys, livenessKeys, body)
	}
	if strings.Contains(body, "hunter2") || (secretPath != "" && strings.Contains(body, secretPath)) {
		t.Errorf("%s: /health leaks a secret or the operator's path: %s", name, body)
	}
}

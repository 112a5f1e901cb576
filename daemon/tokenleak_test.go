package daemon

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokensNeverReachTheLogs: the daemon's token and a scoped token,
// right and wrong, sent in the Authorization header and in ?token= to
// /mcp, /tools, /ssh and /gateway, Authorization headers of nearly 1 MiB
// and of 2 MiB, two Bearer credentials in one header, a second
// Authorization header, and a reload of a token file holding a token
// where its digest belongs: none of these tokens appears in the daemon's
// log (debug level), the audit log or the reload's error. A header under
// net/http's 1 MiB bound is refused 401, one over it 431 before any
// handler; two credentials in one header are refused; only the first
// Authorization header counts; a failed reload keeps the set in force.
func TestTokensNeverReachTheLogs(t *testing.T) {
	const master, alice, wrong = "master-s3cret-XYZ", "alice-s3cret-ABC", "wrong-s3cret-QQQ"
	c := testConfig(t)
	c.AuthToken = master
	c.AuditLog = filepath.Join(t.TempDir(), "audit.log")
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[`+tokenLine("alice", alice, "")+`]}`), 0o600))
	c.TokensFile = tokens
	must(t, c.Validate())
	r := start(t, c, nil)

	for _, tok := range []string{master, alice, wrong} {
		callAs(t, r.url, tok, "", "list_directory", `{"path":"."}`)
		for _, path := range []string{"/mcp?token=" + tok, "/tools?token=" + tok, "/gateway?token=" + tok} {
			guardRequest(t, r.url, path, http.MethodGet, "", map[string]string{"Authorization": "Bearer " + wrong}, "", "")
		}
		sshAdmits(t, r.url, "Bearer "+tok, "")
		sshAdmits(t, r.url, "", "token="+tok)
	}
	if code, _ := guardRequest(t, r.url, "/tools", http.MethodGet, "", map[string]string{"Authorization": "Bearer " + strings.Repeat(wrong, 1<<20/len(wrong)-1)}, "", ""); code != http.StatusUnauthorized {
		t.Errorf("an Authorization header just under 1 MiB: %d, want 401", code)
	}
	if code, _ := guardRequest(t, r.url, "/tools", http.MethodGet, "", map[string]string{"Authorization": "Bearer " + strings.Repeat(wrong, 2<<20/len(wrong))}, "", ""); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 2 MiB Authorization header: %d, want 431", code)
	}
	if code, _ := guardRequest(t, r.url, "/tools", http.MethodGet, "", map[string]string{"Authorization": "Bearer " + wrong + ", Bearer " + master}, "", ""); code != http.StatusUnauthorized {
		t.Errorf("two Bearer credentials in one header: %d, want 401", code)
	}
	req, _ := http.NewRequest(http.MethodGet, r.url+"/tools", nil)
	req.Header.Add("Authorization", "Bearer "+wrong)
	req.Header.Add("Authorization", "Bearer "+master)
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a second Authorization header with the right token: %d, want 401 (the first counts)", resp.StatusCode)
	}
	// The operator's slip: the token itself where its digest belongs.
	must(t, os.WriteFile(tokens, []byte(`{"tokens":[{"name":"bob","sha256":"`+master+`"}]}`), 0o600))
	if _, err := r.d.ReloadTokens(); err == nil || strings.Contains(err.Error(), master) {
		t.Errorf("reloading a token file with a token for a digest: %v", err)
	}
	if code, _ := callAs(t, r.url, alice, "", "list_directory", `{"path":"."}`); code != http.StatusOK {
		t.Errorf("alice after a failed reload: %d", code)
	}
	must(t, r.stop())
	audit, _ := os.ReadFile(c.AuditLog)
	if len(audit) == 0 {
		t.Fatal("the audit log is empty: the calls were not audited")
	}
	for _, tok := range []string{master, alice, wrong} {
		if strings.Contains(r.logs.String(), tok) {
			t.Errorf("the daemon's log holds %s", tok)
		}
		if strings.Contains(string(audit), tok) {
			t.Errorf("the audit log holds %s", tok)
		}
	}
}

package daemon

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// TestMetricsFamilies: every family /metrics serves has the HELP and TYPE
// lines client_golang wrote for it (testdata/metrics-families.txt, captured
// from the daemon before internal/metrics replaced it), and a daemon with
// an audit log and checkpoints serves every family of that file but those
// of features it does not run or events that did not happen.
func TestMetricsFamilies(t *testing.T) {
	want := map[string][2]string{} // family → its HELP line, its TYPE line
	f, err := os.Open("testdata/metrics-families.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		kind, name, ok := headerLine(sc.Text())
		if !ok {
			continue
		}
		lines := want[name]
		lines[kind] = sc.Text()
		want[name] = lines
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}

	c := testConfig(t)
	c.AuditLog = t.TempDir() + "/audit.log"
	c.Checkpoints = "manual"
	c.StateDir = t.TempDir()
	r := start(t, c, nil)
	get(t, r.url+"/health")
	_, body := get(t, r.url+"/metrics")
	got := map[string][2]string{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if kind, name, ok := headerLine(line); ok {
			lines := got[name]
			lines[kind] = line
			got[name] = lines
		}
	}
	for name, lines := range got {
		if want[name] != lines {
			t.Errorf("%s:\n got  %q\n want %q", name, lines, want[name])
		}
	}
	absent := map[string]bool{
		"agentbe_http_connections_refused_total": true, // no connection was refused
		"agentbe_ssh_auth_attempts_total":        true, // no --ssh-listen
		"agentbe_tool_calls_total":               true, // no tool was called
		"agentbe_tool_errors_total":              true,
		"agentbe_tool_call_duration_seconds":     true,
		"agentbe_transactions_pending":           true, // no --transactions
	}
	for name := range want {
		if _, ok := got[name]; !ok && !absent[name] {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// headerLine splits "# HELP name text" and "# TYPE name type" into the
// index of its kind (0 HELP, 1 TYPE) and the family's name.
func headerLine(line string) (kind int, name string, ok bool) {
	rest, isHelp := strings.CutPrefix(line, "# HELP ")
	if !isHelp {
		if rest, ok = strings.CutPrefix(line, "# TYPE "); !ok {
			return 0, "", false
		}
		kind = 1
	}
	name, _, _ = strings.Cut(rest, " ")
	return kind, name, true
}

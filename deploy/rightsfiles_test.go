package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestCheckConfigRightsFilesAsMounted: the files that grant rights
// (--exec-approvals, --upstreams, --auth-token-file; internal/opfile's
// rule) as a pod and a systemd unit give them to a daemon running as the
// image's user (uid 10001): in a ConfigMap volume (root's files, 0644,
// each a symlink through ..data, the mount point 1777) and in a
// LoadCredential= directory (the service user's, 0500, files 0400) pass
// --check-config; the same approvals file group-writable by the pod's
// group, or owned by another user, fails it naming the flag, the file and
// the fix.
func TestCheckConfigRightsFilesAsMounted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the kubelet's and systemd's files are root's, and the daemon must run as another uid")
	}
	const uid = 10001
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	top, err := os.MkdirTemp("", "agentbe-mounted-")
	must(err)
	t.Cleanup(func() { os.RemoveAll(top) })
	must(os.Chmod(top, 0o755))
	bin := filepath.Join(top, "agent-backend")
	data, err := os.ReadFile(daemonBin(t))
	must(err)
	must(os.WriteFile(bin, data, 0o755))
	ws := filepath.Join(top, "workspace")
	state := filepath.Join(top, "state")
	for _, d := range []string{ws, state} {
		must(os.Mkdir(d, 0o700))
		must(os.Chown(d, uid, uid))
	}
	files := map[string]string{
		"approvals.json":   `{"allowlist":{"commands":["ls"]}}`,
		"mcp_servers.json": `{"servers":[]}`,
		"token":            "agent-token-Qm4x7Tz9Lp2v\n",
	}

	// A ConfigMap volume as the kubelet lays it out.
	cm := filepath.Join(top, "configmap")
	ts := "..2026_11_28_05_30_00.1234567890"
	must(os.MkdirAll(filepath.Join(cm, ts), 0o755))
	must(os.Symlink(ts, filepath.Join(cm, "..data")))
	for name, body := range files {
		must(os.WriteFile(filepath.Join(cm, ts, name), []byte(body), 0o644))
		must(os.Symlink(filepath.Join("..data", name), filepath.Join(cm, name)))
	}
	must(os.Chmod(cm, 0o777|os.ModeSticky))

	// systemd's LoadCredential=: the unit's directory, its user's, read-only.
	cred := filepath.Join(top, "credentials", "agentbe.service")
	must(os.MkdirAll(cred, 0o755))
	for name, body := range files {
		p := filepath.Join(cred, name)
		must(os.WriteFile(p, []byte(body), 0o400))
		must(os.Chown(p, uid, uid))
	}
	must(os.Chown(cred, uid, uid))
	must(os.Chmod(cred, 0o500))

	checkConfig := func(dir string) (string, error) {
		cmd := exec.Command(bin, "daemon", "--check-config", "--root", ws, "--state-dir", state,
			"--bind", "127.0.0.1", "--port", strconv.Itoa(freePort(t)), "--isolation", "software",
			"--gateway-tools", "--exec-approvals", filepath.Join(dir, "approvals.json"),
			"--upstreams", filepath.Join(dir, "mcp_servers.json"),
			"--auth-token-file", filepath.Join(dir, "token"))
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + state}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, dir := range []string{cm, cred} {
		if out, err := checkConfig(dir); err != nil {
			t.Fatalf("--check-config as uid %d with the files in %s: %v\n%s", uid, dir, err, out)
		}
	}

	approvals := filepath.Join(cm, ts, "approvals.json")
	must(os.Chown(approvals, 0, uid))
	must(os.Chmod(approvals, 0o664))
	out, err := checkConfig(cm)
	if err == nil || !strings.Contains(out, "--exec-approvals: "+filepath.Join(cm, "approvals.json")) || !strings.Contains(out, "is writable by its group or by others") || !strings.Contains(out, "chmod go-w") {
		t.Fatalf("a group-writable approvals file: %v\n%s", err, out)
	}
	must(os.Chmod(approvals, 0o644))
	must(os.Chown(approvals, 65534, 65534))
	out, err = checkConfig(cm)
	if err == nil || !strings.Contains(out, "--exec-approvals: ") || !strings.Contains(out, "is owned by uid 65534") || !strings.Contains(out, "chown root") {
		t.Fatalf("an approvals file nobody owns: %v\n%s", err, out)
	}
}

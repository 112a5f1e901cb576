package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/config"
	"github.com/agentbe/agentbe-daemon/internal/testenv"
)

// rightsFiles names every file that grants rights which a part of the
// daemon loads: the partFiles, the --site-env-file (secrets the site's
// commands get), an --extensions file (code the daemon runs) and the
// --site's README.md (the commands its tools allow). It returns flag ->
// file; a directory's flag names a file in it.
func rightsFiles(t *testing.T, c *config.Config) map[string]string {
	t.Helper()
	files := partFiles(t, c)
	site := t.TempDir()
	must(t, os.WriteFile(filepath.Join(site, "README.md"), []byte("# site\n"), 0o644))
	env := filepath.Join(t.TempDir(), "site.env")
	must(t, os.WriteFile(env, []byte("API_KEY=x\n"), 0o600))
	ext := t.TempDir()
	star := filepath.Join(ext, "notes.star")
	must(t, os.WriteFile(star, []byte("def describe_extension():\n    return {}\n"), 0o600))
	c.Site, c.SiteEnvFile, c.Extensions = site, env, ext
	files["--site-env-file"], files["--extensions"], files["--site"] = env, star, filepath.Join(site, "README.md")
	c.GatewayTools = true
	return files
}

// TestPartsRefuseRightsFilesOthersCanChange: each file that grants rights
// (docs/configuration.md), made writable by others, fails --check-config
// (Check) with one error naming the flag, the file, what is wrong and the
// fix (chmod go-w FILE), and the approvals file so made stops New.
// Running as root, each given to nobody fails the same way (chown root).
func TestPartsRefuseRightsFilesOthersCanChange(t *testing.T) {
	for _, bad := range []string{"world-writable", "owned by nobody"} {
		for _, flag := range []string{"--tokens", "--upstreams", "--exec-approvals", "--ssh-authorized-keys", "--site-env-file", "--extensions", "--site"} {
			t.Run(bad+"/"+flag, func(t *testing.T) {
				c := testConfig(t)
				files := rightsFiles(t, &c)
				file := files[flag]
				want := []string{flag, file}
				if bad == "world-writable" {
					must(t, os.Chmod(file, 0o666))
					want = append(want, "is writable by its group or by others", "chmod go-w "+file)
				} else {
					if os.Geteuid() != 0 {
						t.Skip("needs root: only root can give a file to another user (CI runs as root)")
					}
					must(t, os.Chown(file, 65534, 65534))
					want = append(want, "is owned by uid 65534", "chown root "+file)
				}
				must(t, c.Validate())
				errs := Check(c)
				if len(errs) != 1 {
					t.Fatalf("Check: %v; want one error", errs)
				}
				for _, w := range want {
					if !strings.Contains(errs[0].Error(), w) {
						t.Errorf("Check: %v; want it to say %q", errs[0], w)
					}
				}
				if flag != "--exec-approvals" {
					return
				}
				d, err := New(c, Options{})
				if err == nil {
					d.Close()
					t.Fatal("New started with an approvals file others can change")
				}
				if !strings.Contains(err.Error(), "chmod go-w "+file) && !strings.Contains(err.Error(), "chown root "+file) {
					t.Errorf("New: %v", err)
				}
			})
		}
	}
}

// TestPartsReadRightsFilesFromAConfigMap: the same files mounted as the
// kubelet mounts a ConfigMap (each a symlink through ..data into a
// timestamped directory, the mount point 1777) pass Check.
func TestPartsReadRightsFilesFromAConfigMap(t *testing.T) {
	c := testConfig(t)
	files := rightsFiles(t, &c)
	body := map[string]string{}
	for _, p := range files {
		b, err := os.ReadFile(p)
		must(t, err)
		body[filepath.Base(p)] = string(b)
	}
	vol := filepath.Join(t.TempDir(), "config")
	paths := testenv.ConfigMapVolume(t, vol, body)
	c.TokensFile = paths["tokens.json"]
	c.Upstreams = paths["mcp_servers.json"]
	c.ExecApprovals = paths["approvals.json"]
	c.SSHAuthorizedKeys = paths["authorized_keys"]
	c.SiteEnvFile = paths["site.env"]
	c.Extensions = vol
	must(t, c.Validate())
	if errs := Check(c); len(errs) != 0 {
		t.Fatalf("Check of the files in a ConfigMap volume: %v", errs)
	}
}

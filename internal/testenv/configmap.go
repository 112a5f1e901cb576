package testenv

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ConfigMapVolume lays out files at dir the way the kubelet mounts a
// ConfigMap (deploy/kubernetes; the same atomic-writer layout as a Secret,
// see TestReadKubernetesSecretVolume in internal/opfile): each file in a
// timestamped directory (0755), "..data" a symlink to it, each key a
// symlink through "..data", the files 0644 and the mount point 1777. What
// the kubelet makes is root's; the test's user owns it here, which is root
// in CI. It returns each key's path.
func ConfigMapVolume(t testing.TB, dir string, files map[string]string) map[string]string {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ts := "..2026_11_28_05_30_00.1234567890"
	must(os.MkdirAll(filepath.Join(dir, ts), 0o755))
	must(os.Chmod(filepath.Join(dir, ts), 0o755))
	must(os.Symlink(ts, filepath.Join(dir, "..data")))
	paths := map[string]string{}
	for key, body := range files {
		p := filepath.Join(dir, ts, key)
		must(os.WriteFile(p, []byte(body), 0o644))
		must(os.Chmod(p, 0o644))
		must(os.Symlink(filepath.Join("..data", key), filepath.Join(dir, key)))
		paths[key] = filepath.Join(dir, key)
	}
	must(os.Chmod(dir, 0o777|os.ModeSticky))
	return paths
}

// ConfigMapUpdate changes the files of a ConfigMapVolume as the kubelet
// does (its atomic writer): the new files in a new timestamped directory,
// a "..data_tmp" link to it renamed over "..data" (the one atomic step), a
// link for each new key, the links of the keys gone removed, then the old
// timestamped directory. It returns each key's path.
func ConfigMapUpdate(t testing.TB, dir string, files map[string]string) map[string]string {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "..data")
	old, err := os.Readlink(data)
	must(err)
	ts, err := os.MkdirTemp(dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	must(err)
	must(os.Chmod(ts, 0o755))
	for key, body := range files {
		p := filepath.Join(ts, key)
		must(os.WriteFile(p, []byte(body), 0o644))
		must(os.Chmod(p, 0o644))
	}
	tmp := filepath.Join(dir, "..data_tmp")
	must(os.Symlink(filepath.Base(ts), tmp))
	must(os.Rename(tmp, data))
	paths := map[string]string{}
	for key := range files {
		link := filepath.Join(dir, key)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			must(os.Symlink(filepath.Join("..data", key), link))
		}
		paths[key] = link
	}
	entries, err := os.ReadDir(filepath.Join(dir, old))
	must(err)
	for _, e := range entries {
		if _, kept := files[e.Name()]; !kept {
			must(os.Remove(filepath.Join(dir, e.Name())))
		}
	}
	must(os.RemoveAll(filepath.Join(dir, old)))
	return paths
}

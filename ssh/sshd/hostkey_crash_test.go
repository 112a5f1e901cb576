package sshd

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestHostKeyFirstStartsAtOnce: daemons sharing a state directory start
// together for the first time, each calling LoadOrCreateHostKey on the one
// path. Every one gets a key, the same key, and the file holds it: no
// caller reads a file another has created but not yet written.
func TestHostKeyFirstStartsAtOnce(t *testing.T) {
	for round := range 40 {
		path := filepath.Join(t.TempDir(), "state", "ssh_host_ed25519_key")
		const n = 8
		keys := make([][]byte, n)
		errs := make([]error, n)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				k, err := LoadOrCreateHostKey(path)
				errs[i] = err
				if err == nil {
					keys[i] = k.PublicKey().Marshal()
				}
			}()
		}
		start.Done()
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: start %d of %d at once: %v", round, i, n, errs[i])
			}
			if !bytes.Equal(keys[i], keys[0]) {
				t.Fatalf("round %d: starts %d and 0 got different host keys", round, i)
			}
		}
		onDisk, err := LoadOrCreateHostKey(path)
		if err != nil || !bytes.Equal(onDisk.PublicKey().Marshal(), keys[0]) {
			t.Fatalf("round %d: the file does not hold the key every start got (%v)", round, err)
		}
		if left := tempsIn(t, filepath.Dir(path)); len(left) > 0 {
			t.Fatalf("round %d: temp files left: %v", round, left)
		}
	}
}

// killChildEnv names the directory the helper process makes keys in.
const killChildEnv = "AGENTBE_HOSTKEY_KILL_CHILD"

// hostKeyKillChild is the process TestHostKeyKilledWhileWriting kills
// (TestMain runs it when killChildEnv names a directory): it creates host
// keys in fresh directories, one after another, until it is killed.
func hostKeyKillChild(dir string) {
	for i := 0; ; i++ {
		if _, err := LoadOrCreateHostKey(filepath.Join(dir, strconv.Itoa(i), "key")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
}

// TestHostKeyKilledWhileWriting: a first start killed with SIGKILL at a
// random moment of the host key's creation, 50 times. Each time, every key
// the killed process was creating is whole or absent (never an empty or
// cut-short file, which would stop every later start until someone removes
// it), the next start (LoadOrCreateHostKey) succeeds on each, and no temp
// file is left behind.
func TestHostKeyKilledWhileWriting(t *testing.T) {
	if testing.Short() {
		t.Skip("50 helper processes killed with SIGKILL: not in -short")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	made := 0
	for cycle := range 50 {
		dir := filepath.Join(base, strconv.Itoa(cycle))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// Let it make some keys first (the test binary's start takes a
		// few milliseconds), then kill it at a random moment.
		var ended error
	wait:
		for {
			if ents, _ := os.ReadDir(dir); len(ents) > 2 {
				break
			}
			select {
			case err := <-done:
				t.Fatalf("cycle %d: the helper ended by itself (%v): %s", cycle, err, stderr.String())
			case <-time.After(time.Millisecond):
				continue wait
			}
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		ended = <-done
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("cycle %d: the helper ended by itself (%v): %s", cycle, ended, stderr.String())
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			sub := filepath.Join(dir, e.Name())
			key := filepath.Join(sub, "key")
			if _, err := os.Lstat(key); err == nil {
				made++
			}
			if _, err := LoadOrCreateHostKey(key); err != nil {
				data, _ := os.ReadFile(key)
				t.Fatalf("cycle %d: the start after the kill fails on %s (%d bytes left by the killed one): %v", cycle, key, len(data), err)
			}
			if left := tempsIn(t, sub); len(left) > 0 {
				t.Fatalf("cycle %d: temp files left in %s: %v", cycle, sub, left)
			}
		}
	}
	t.Logf("%d keys made by 50 killed processes, each whole", made)
}

// tempsIn lists what is in dir besides the key.
func tempsIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), "_key") && e.Name() != "key" {
			left = append(left, e.Name())
		}
	}
	return left
}

// TestHostKeyInAGroupWritableVolume: the state directory on a pod's
// volume, which fsGroup makes group-writable with the setgid bit (2777 for
// an emptyDir, 2775 for many volumes). The key made there on the first
// start loads on every start after it: the key's own mode is judged, not
// the directories above it.
func TestHostKeyInAGroupWritableVolume(t *testing.T) {
	vol := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(vol, 0o2777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(vol, "ssh_host_ed25519_key")
	k1, err := LoadOrCreateHostKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateHostKey(path) // the restart
	if err != nil {
		t.Fatalf("the restart in a group-writable volume: %v", err)
	}
	if !bytes.Equal(k1.PublicKey().Marshal(), k2.PublicKey().Marshal()) {
		t.Fatal("the restart got another key")
	}
}

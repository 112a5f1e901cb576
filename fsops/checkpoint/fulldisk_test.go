package checkpoint

import (
	"context"
	"strings"
	"syscall"
	"testing"
)

// TestFullDiskThenSpaceBack: the state directory's file system fills up
// (RLIMIT_FSIZE stands in for it: a write past it fails with EFBIG, as
// one past a full disk fails with ENOSPC) during a checkpoint, with and
// without --fsync. The checkpoint is refused with the error, the store
// holds what it held (no temp file, no blob no manifest names, its bytes
// counted right), and once space returns the next checkpoint is taken and
// every checkpoint restores, after a restart too.
func TestFullDiskThenSpaceBack(t *testing.T) {
	for _, durable := range []bool{false, true} {
		f := newFixture(t, func(o *Options) { o.Durable = durable })
		f.write(t, "a.txt", strings.Repeat("first ", 200))
		c1 := f.create(t, "before")
		f.write(t, "a.txt", strings.Repeat("second ", 300))
		f.write(t, "b.txt", strings.Repeat("new ", 500))

		var old syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
		full := syscall.Rlimit{Cur: 512, Max: old.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &full); err != nil {
			t.Fatal(err)
		}
		_, err := f.st.Create(context.Background(), f.ws, CreateOptions{Label: "full"})
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			t.Fatalf("durable=%v: a checkpoint on a full disk succeeded", durable)
		}
		t.Logf("durable=%v: the full disk's checkpoint: %v", durable, err)
		n, tmp, blobs := storeBytes(t, f.storeDir)
		if tmp != 0 || blobs != 1 || f.st.Stats().Bytes != n || len(f.st.List(f.ws)) != 1 {
			t.Fatalf("durable=%v: after the refused checkpoint: %d temp files, %d blobs (want 1), stats %d bytes, directory %d, %d listed",
				durable, tmp, blobs, f.st.Stats().Bytes, n, len(f.st.List(f.ws)))
		}

		c2 := f.create(t, "space back")
		f.reopen(t)
		for _, id := range []string{c1.ID, c2.ID} {
			if _, err := f.st.Restore(context.Background(), f.ws, id, nil); err != nil {
				t.Fatalf("durable=%v: restore %s after the full disk and a restart: %v", durable, id, err)
			}
		}
		if got := snapshot(t, f.dir)["b.txt"]; !strings.Contains(got, "new new") {
			t.Fatalf("durable=%v: b.txt after restoring the checkpoint taken once space returned: %q", durable, got)
		}
	}
}

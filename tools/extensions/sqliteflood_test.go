package extensions

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// rssBytes is the process's resident set now (VmRSS): SQLite's memory is
// modernc's C heap, outside what the Go runtime reports.
func rssBytes(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// sqliteHighWater is the most SQLite held since the last reset; reset
// starts a new period.
func sqliteHighWater(reset bool) int64 {
	tls := libc.NewTLS()
	defer tls.Close()
	r := int32(0)
	if reset {
		r = 1
	}
	return sqlite3.Xsqlite3_memory_highwater(tls, r)
}

// peaks samples the Go heap and the resident set until stop is called,
// which returns the highest of each.
func peaks(t testing.TB) (stop func() (heap, rss int64)) {
	var heap, rss atomic.Int64
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if h := int64(m.HeapInuse); h > heap.Load() {
				heap.Store(h)
			}
			if r := rssBytes(t); r > rss.Load() {
				rss.Store(r)
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() (int64, int64) {
		close(done)
		<-finished
		return heap.Load(), rss.Load()
	}
}

// bigDatabases writes n copies of a database of 30 rows of 1 MiB (a
// little over 30 MiB, under MaxSQLiteBytes) into the
// workspace as big0.db, big1.db, ...
func bigDatabases(t testing.TB, root string, n int) int64 {
	t.Helper()
	seed := filepath.Join(t.TempDir(), "seed.db")
	db, err := sql.Open("sqlite", seed)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB); " +
		"INSERT INTO t (b) SELECT zeroblob(1 << 20) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 30) SELECT x FROM c)")
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	img, err := os.ReadFile(seed)
	if err != nil {
		t.Fatal(err)
	}
	if len(img) > MaxSQLiteBytes || len(img) < 30<<20 {
		t.Fatalf("the seed database holds %d bytes", len(img))
	}
	for i := range n {
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("big%d.db", i)), img, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return int64(len(img))
}

// sqliteIdle checks that nothing of the module is held: every database
// slot and every file lock free, SQLite's memory back near nothing.
func sqliteIdle(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !sqliteOpen.TryAcquire(MaxSQLiteOpen) {
		if time.Now().After(deadline) {
			t.Fatal("a database slot is still held after every call returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
	sqliteOpen.Release(MaxSQLiteOpen)
	for i, l := range sqliteLocks() {
		if !l.TryAcquire(sqliteWriter) {
			t.Fatalf("file lock stripe %d is still held after every call returned", i)
		}
		l.Release(sqliteWriter)
	}
	if used := sqliteHeapUsed(); used > 4<<20 {
		t.Errorf("SQLite still holds %.1f MiB after every call returned", float64(used)/(1<<20))
	}
}

// floodFixture is the sqlite extension with a registry that lets n calls
// run at once and wait long for a slot, so that the module's own bounds,
// not the registry's, are what the flood meets.
func floodFixture(t *testing.T, n int) *fixture {
	return start(t, map[string]string{"db.star": sqliteExt}, func(o *Options) {
		o.Registry = registry.New(registry.Options{MaxConcurrent: n, QueueWait: time.Minute, DefaultTimeout: time.Minute})
	})
}

// TestAttackSQLiteLoadFlood: 24 sqlite.query calls at once on 8 different
// databases of 30 MiB (4 of them on the same one): every call answers,
// SQLite never holds more than MaxSQLiteOpen databases at once (its
// memory's high-water mark stays under 4 of them), the Go heap holds at
// most 4 images, and afterwards every slot, lock, descriptor and byte is
// given back.
func TestAttackSQLiteLoadFlood(t *testing.T) {
	const dbs, calls = 8, 24
	f := floodFixture(t, calls)
	size := bigDatabases(t, f.ws.Root(), dbs)
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	baseHeap, baseRSS, baseFDs, baseG := int64(m.HeapInuse), rssBytes(t), openFDs(t), runtime.NumGoroutine()
	sqliteHighWater(true)
	stop := peaks(t)
	began := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := range calls {
		db := fmt.Sprintf("big%d.db", i%dbs)
		if i >= calls-4 {
			db = "big0.db" // the same file from four calls
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			txt, isErr, _ := f.call(t, "db__query", sqlArgs(t, db, "SELECT count(*) AS n, sum(length(b)) AS s FROM t"))
			if isErr || txt != `[{"n":30,"s":31457280}]` {
				failed.Add(1)
				t.Errorf("query %d on %s: %.300s", i, db, txt)
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	peakHeap, peakRSS := stop()
	high := sqliteHighWater(false)
	if limit := MaxSQLiteOpen*size + 16<<20; high > limit {
		t.Errorf("SQLite held %d MiB at once: more than %d databases of %d MiB were loaded together", high>>20, MaxSQLiteOpen, size>>20)
	}
	// Images of calls that finished wait for the collector: the peak may
	// hold some twice over, never all 24.
	if grew := peakHeap - baseHeap; grew > 3*MaxSQLiteOpen*size+64<<20 {
		t.Errorf("the Go heap grew by %d MiB at its peak; want about the images of %d databases", grew>>20, MaxSQLiteOpen)
	}
	t.Logf("%d queries on %d databases of %.1f MiB in %v: SQLite's high-water mark %.1f MiB (%.2f databases' worth), Go heap +%.1f MiB at peak, RSS %d -> %d MiB at peak",
		calls, dbs, float64(size)/(1<<20), took.Round(time.Millisecond), float64(high)/(1<<20), float64(high)/float64(size),
		float64(peakHeap-baseHeap)/(1<<20), baseRSS>>20, peakRSS>>20)
	sqliteIdle(t)
	if fds := openFDs(t); fds > baseFDs+2 {
		t.Errorf("%d descriptors open after the flood; %d before", fds, baseFDs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseG+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > baseG+2 {
		t.Errorf("%d goroutines after the flood; %d before", g, baseG)
	}
}

// TestAttackSQLiteCancelMidLoad: 32 calls on 8 databases of 30 MiB, each
// with a deadline between 1 ms and 2 s, so that calls end while waiting
// for a file's lock, for one of the database slots, while reading the
// file, loading it and running the statement. Every call returns (an
// answer or "cancelled"), and nothing stays held: slots, locks,
// descriptors, SQLite's memory.
func TestAttackSQLiteCancelMidLoad(t *testing.T) {
	const dbs, calls = 8, 32
	f := floodFixture(t, calls)
	bigDatabases(t, f.ws.Root(), dbs)
	baseFDs := openFDs(t)
	var wg sync.WaitGroup
	var answered, cancelled atomic.Int32
	began := time.Now()
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+i*64)*time.Millisecond)
			defer cancel()
			sqlText := "SELECT count(*) AS n FROM t"
			if i%2 == 1 { // a write: the file's whole lock, a write-back
				txt, isErr, _ := f.callCtx(t, ctx, "db__execute", sqlArgs(t, fmt.Sprintf("big%d.db", i%dbs), "UPDATE t SET b = b WHERE id = 1"))
				switch {
				case !isErr:
					answered.Add(1)
				case strings.Contains(txt, "cancelled") || strings.Contains(txt, "deadline exceeded") || strings.Contains(txt, "interrupted"):
					cancelled.Add(1)
				default:
					t.Errorf("execute %d: %.300s", i, txt)
				}
				return
			}
			txt, isErr, _ := f.callCtx(t, ctx, "db__query", sqlArgs(t, fmt.Sprintf("big%d.db", i%dbs), sqlText))
			switch {
			case !isErr && txt == `[{"n":30}]`:
				answered.Add(1)
			case isErr && (strings.Contains(txt, "cancelled") || strings.Contains(txt, "deadline exceeded") || strings.Contains(txt, "interrupted")):
				cancelled.Add(1)
			default:
				t.Errorf("query %d: %.300s", i, txt)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d calls with deadlines of 1 to %d ms: %d answered, %d cancelled, in %v", calls, 1+(calls-1)*64, answered.Load(), cancelled.Load(), time.Since(began).Round(time.Millisecond))
	if cancelled.Load() == 0 {
		t.Error("no call was cancelled: the deadlines did not bite")
	}
	sqliteIdle(t)
	if fds := openFDs(t); fds > baseFDs+2 {
		t.Errorf("%d descriptors open after the cancellations; %d before", fds, baseFDs)
	}
	// The files are whole: a write cut by its deadline never writes back
	// half an image.
	for i := range dbs {
		if txt, isErr, _ := f.call(t, "db__query", sqlArgs(t, fmt.Sprintf("big%d.db", i), "PRAGMA integrity_check")); isErr || txt != `[{"integrity_check":"ok"}]` {
			t.Errorf("big%d.db after the cancellations: %.300s", i, txt)
		}
	}
}

// TestAttackSQLiteWorkingMemoryBounded: statements whose working memory
// grows with rows a recursive CTE generates (a sort, count(DISTINCT),
// GROUP BY, a window), on an empty database, none returning more than a row
// before it has seen them all, each asking for more than a gigabyte:
// each fails with "out of memory" once SQLite holds MaxSQLiteHeap, the
// process's resident set stays within about twice that (modernc's
// allocator), and the memory is given back for the next call.
func TestAttackSQLiteWorkingMemoryBounded(t *testing.T) {
	if err := sqliteHeap(); err != nil {
		t.Fatal(err)
	}
	// The registry's call bound is a hang guard here, not the limit under
	// test: under -race on a loaded machine a query takes many seconds
	// (SQLite is instrumented Go) before it meets the heap limit.
	f := start(t, map[string]string{"db.star": sqliteExt}, func(o *Options) {
		o.Registry = registry.New(registry.Options{DefaultTimeout: 5 * time.Minute})
	})
	if txt, isErr, _ := f.call(t, "db__execute", sqlArgs(t, "e.db", "CREATE TABLE t (x)")); isErr {
		t.Fatal(txt)
	}
	const rows = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 12000) "
	const wide = "printf('%.*c', 100000, 'x') || x"
	runtime.GC()
	baseRSS := rssBytes(t)
	for _, q := range []string{
		rows + "SELECT x, " + wide + " AS b FROM c ORDER BY x DESC",
		rows + "SELECT count(DISTINCT " + wide + ") AS n FROM c",
		rows + "SELECT " + wide + " AS b, count(*) AS n FROM c GROUP BY b",
		rows + "SELECT max(r) AS m FROM (SELECT row_number() OVER (ORDER BY b) AS r FROM (SELECT " + wide + " AS b FROM c))",
	} {
		sqliteHighWater(true)
		stop := peaks(t)
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		txt, isErr, _ := f.callCtx(t, ctx, "db__query", sqlArgs(t, "e.db", q))
		cancel()
		_, peakRSS := stop()
		high := sqliteHighWater(false)
		if !isErr || !strings.Contains(txt, "out of memory") || !strings.Contains(txt, fmt.Sprintf("%d MiB", MaxSQLiteHeap>>20)) {
			t.Errorf("%.80s…: %.300q %v", q[len(rows):], txt, isErr)
		}
		if high > MaxSQLiteHeap {
			t.Errorf("%.80s…: SQLite held %d MiB; the bound is %d", q[len(rows):], high>>20, MaxSQLiteHeap>>20)
		}
		if grew := peakRSS - baseRSS; grew > 2*MaxSQLiteHeap+128<<20 {
			t.Errorf("%.80s…: the resident set grew by %d MiB", q[len(rows):], grew>>20)
		}
		t.Logf("%.60s…: refused after %v; SQLite's high-water mark %d MiB, RSS %d -> %d MiB at peak",
			q[len(rows):], time.Since(began).Round(time.Millisecond), high>>20, baseRSS>>20, peakRSS>>20)
		sqliteIdle(t)
	}
	if txt, isErr, _ := f.call(t, "db__query", sqlArgs(t, "e.db", rows+"SELECT count(*) AS n FROM c")); isErr || txt != `[{"n":12000}]` {
		t.Errorf("a query after the refusals: %.300s", txt)
	}
}

package extensions

import (
	"fmt"
	"strings"
	"sync"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// MaxSQLiteHeap bounds the memory SQLite holds across the daemon (its C
// heap, outside Go's): the MaxSQLiteOpen databases loaded at once, each an
// in-memory copy of its file that may grow to MaxSQLiteBytes and temporary
// tables bounded the same, and what their statements need to run. A
// statement's working memory has no bound of its own: with temporary
// storage in memory (the module never lets SQLite open a file), a sort
// (ORDER BY), DISTINCT or GROUP BY over rows a recursive CTE generates
// keeps every row in memory until the first one is returned, and one such
// query took the daemon from 19 MiB to 838 MiB in 12 s. Past this bound an
// allocation fails, and the statement with it ("out of memory"), whichever
// database asked.
const MaxSQLiteHeap = MaxSQLiteOpen * 2 * MaxSQLiteBytes

// sqliteHeap puts MaxSQLiteHeap in force, once, and says why it could not
// (nil when it is); openSQLite calls it before it opens a database and
// refuses to load one on an error. On the first use, not at the package's
// initialization: setting the limit initializes SQLite
// (sqlite3_hard_heap_limit64 calls sqlite3_initialize), which pages in
// about a megabyte of its code and data and starts its allocator, and a
// daemon whose extensions never open a database (most, and every daemon
// without --extensions) should not pay that at start. Nothing else in the
// daemon opens SQLite, so the first openSQLite still runs before SQLite
// initializes; tests that open SQLite themselves call it first (TestMain).
var sqliteHeap = sync.OnceValue(func() error { return limitSQLiteHeap(MaxSQLiteHeap) })

// limitSQLiteHeap turns SQLite's memory accounting on (modernc builds it
// with SQLITE_DEFAULT_MEMSTATUS=0, and without it the heap limits are not
// checked) and sets its hard heap limit to n bytes. The accounting can only
// be switched before SQLite initializes, so this runs before any connection
// is opened (sqliteHeap); SQLite's memory and its limit are process-wide.
func limitSQLiteHeap(n int64) error {
	tls := libc.NewTLS()
	defer tls.Close()
	va := libc.Xmalloc(tls, 8)
	if va == 0 {
		return fmt.Errorf("sqlite: out of memory setting its heap limit")
	}
	defer libc.Xfree(tls, va)
	if rc := sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MEMSTATUS, libc.VaList(va, int32(1))); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("sqlite: turning its memory accounting on failed (code %d; something in this process initialized SQLite before the extensions opened their first database)", rc)
	}
	sqlite3.Xsqlite3_hard_heap_limit64(tls, n)
	if got := sqlite3.Xsqlite3_hard_heap_limit64(tls, -1); got != n {
		return fmt.Errorf("sqlite: its hard heap limit is %d, not %d", got, n)
	}
	return nil
}

// sqliteHeapUsed is the memory SQLite holds now, across the daemon.
func sqliteHeapUsed() int64 {
	tls := libc.NewTLS()
	defer tls.Close()
	return sqlite3.Xsqlite3_memory_used(tls)
}

// outOfMemory words SQLite's "out of memory" for the agent: which bound it
// met, and what to do.
func outOfMemory(fn string, err error) error {
	if err == nil || !strings.Contains(err.Error(), "out of memory") {
		return nil
	}
	return fmt.Errorf("%s: out of memory: the statement needs more than the %d MiB SQLite may hold across the daemon's databases (a sort, DISTINCT or GROUP BY keeps all its rows); select fewer rows, add a LIMIT, or sort less",
		fn, MaxSQLiteHeap>>20)
}

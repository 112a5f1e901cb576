package extensions

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteChildEnv marks the child process of TestSQLiteStartsOnFirstUse,
// whose TestMain leaves SQLite alone.
const sqliteChildEnv = "AGENTBE_EXT_SQLITE_CHILD"

// sqliteStarted reports whether SQLite has initialized: from then on it
// refuses configuration (SQLITE_MISUSE). The setting asked for is the one
// limitSQLiteHeap makes, so asking changes nothing it would not.
func sqliteStarted(t *testing.T) bool {
	t.Helper()
	tls := libc.NewTLS()
	defer tls.Close()
	va := libc.Xmalloc(tls, 8)
	if va == 0 {
		t.Fatal("libc.Xmalloc: out of memory")
	}
	defer libc.Xfree(tls, va)
	switch rc := sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MEMSTATUS, libc.VaList(va, int32(1))); rc {
	case sqlite3.SQLITE_OK:
		return false
	case sqlite3.SQLITE_MISUSE:
		return true
	default:
		t.Fatalf("sqlite3_config: code %d", rc)
		return false
	}
}

// TestSQLiteStartsOnFirstUse: loading the package and starting the provider
// with an extension leave SQLite uninitialized (it pages in about a
// megabyte and starts its allocator, which a daemon that never opens a
// database should not pay at start); the first call that opens a database
// initializes it with the heap limit (MaxSQLiteHeap) in force. It runs in a
// child process, this test binary again, because TestMain initializes
// SQLite for the other tests.
func TestSQLiteStartsOnFirstUse(t *testing.T) {
	if os.Getenv(sqliteChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSQLiteStartsOnFirstUse$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), sqliteChildEnv+"=1") // the child runs the test's other half, and starts no child
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestSQLiteStartsOnFirstUse") {
			t.Fatalf("the child process: %v\n%s", err, out)
		}
		return
	}
	f := start(t, map[string]string{"db.star": sqliteExt}, nil)
	if sqliteStarted(t) {
		t.Fatal("SQLite initialized before any call opened a database")
	}
	if txt, isErr, _ := f.call(t, "db__execute", sqlArgs(t, "first.db", "CREATE TABLE t (x)")); isErr {
		t.Fatal(txt)
	}
	if !sqliteStarted(t) {
		t.Fatal("a call opened a database and SQLite did not initialize")
	}
	tls := libc.NewTLS()
	defer tls.Close()
	if got := sqlite3.Xsqlite3_hard_heap_limit64(tls, -1); got != MaxSQLiteHeap {
		t.Fatalf("SQLite's hard heap limit is %d, want MaxSQLiteHeap (%d)", got, int64(MaxSQLiteHeap))
	}
}

// TestValidNameIsThePattern holds validName (an extension's or a tool's
// name, docs/extensions.md) to the pattern ^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$,
// which it checks with a loop: every byte alone and after a letter, lengths
// 0 to 34, and random strings over a mixed alphabet.
func TestValidNameIsThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)
	check := func(name string) {
		t.Helper()
		if got, want := validName(name), pattern.MatchString(name); got != want {
			t.Fatalf("validName(%q) = %v, the pattern = %v", name, got, want)
		}
	}
	for b := range 256 {
		check(string([]byte{byte(b)}))
		check("a" + string([]byte{byte(b)}))
	}
	for n := range 35 {
		check(strings.Repeat("x", n))
		check("_" + strings.Repeat("x", n))
	}
	const alphabet = "aZ09_-./ \n\x00é"
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		b := make([]byte, rng.IntN(36))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		check(string(b))
	}
}

package extensions

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbe/agentbe-daemon/fsops"
	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/httpguard"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// sqliteExt exposes each function of the sqlite module as a tool taking
// its arguments as they are.
const sqliteExt = `
def query(p):
    return sqlite.query(p["path"], p["sql"], p.get("params", []))

def execute(p):
    return sqlite.execute(p["path"], p["sql"], p.get("params", []))

def tables(p):
    return sqlite.list_tables(p["path"])

def describe(p):
    return sqlite.describe_table(p["path"], p["table"])

def blob(p):
    rows = sqlite.query(p["path"], "SELECT b FROM t WHERE b IS NOT NULL")
    return [type(r["b"]) for r in rows] + [len(r["b"]) for r in rows]

def describe_extension():
    return Extension(name = "db", tools = [
        Tool(name = "query", handler = query, annotations = {"readOnlyHint": True}),
        Tool(name = "execute", handler = execute),
        # Claims to be read-only but writes: a read-only caller may call
        # it, and its workspace refuses the write.
        Tool(name = "sneaky", handler = execute, annotations = {"readOnlyHint": True}),
        Tool(name = "tables", handler = tables, annotations = {"readOnlyHint": True}),
        Tool(name = "describe", handler = describe, annotations = {"readOnlyHint": True}),
        Tool(name = "blob", handler = blob, annotations = {"readOnlyHint": True}),
    ])
`

func sqlArgs(t *testing.T, path, query string, params ...any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"path": path, "sql": query, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSQLiteRoundTrip: a table created, filled with bound parameters of
// every type, read back, listed and described; the file written is a
// database another SQLite program reads.
func TestSQLiteRoundTrip(t *testing.T) {
	f := start(t, map[string]string{"db.star": sqliteExt}, nil)
	mustCall := func(tool, args, want string) {
		t.Helper()
		txt, isErr, _ := f.call(t, tool, args)
		if isErr || txt != want {
			t.Errorf("%s %s: %q isError=%v; want %q", tool, args, txt, isErr, want)
		}
	}
	mustCall("db__execute", sqlArgs(t, "data/app.db", `CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL DEFAULT 'anon', score REAL, n INTEGER, b BLOB)`),
		`{"last_insert_id":0,"rows_affected":0}`)
	mustCall("db__execute", sqlArgs(t, "data/app.db", `INSERT INTO t (name, score, n) VALUES (?, ?, ?)`, "ada", 1.5, int64(9007199254740993)),
		`{"last_insert_id":1,"rows_affected":1}`)
	mustCall("db__execute", sqlArgs(t, "data/app.db", `INSERT INTO t (name, score, n) VALUES (?, ?, ?), (?, NULL, ?)`, "bob", -2, nil, "cy", true),
		`{"last_insert_id":3,"rows_affected":2}`)
	mustCall("db__query", sqlArgs(t, "data/app.db", `SELECT id, name, score, n FROM t WHERE id >= ? ORDER BY id`, 1),
		`[{"id":1,"n":9007199254740993,"name":"ada","score":1.5},{"id":2,"n":null,"name":"bob","score":-2},{"id":3,"n":1,"name":"cy","score":null}]`)
	mustCall("db__execute", sqlArgs(t, "data/app.db", `UPDATE t SET b = randomblob(16) WHERE name = ?`, "cy"), `{"last_insert_id":0,"rows_affected":1}`)
	mustCall("db__blob", `{"path":"data/app.db"}`, `["bytes",16]`)
	mustCall("db__tables", `{"path":"data/app.db"}`, `[{"name":"t"}]`)
	mustCall("db__describe", `{"path":"data/app.db","table":"t"}`,
		`[{"cid":0,"default":null,"dflt_value":null,"name":"id","notnull":false,"pk":1,"type":"INTEGER"},{"cid":1,"default":"'anon'","dflt_value":"'anon'","name":"name","notnull":true,"pk":0,"type":"TEXT"},`+
			`{"cid":2,"default":null,"dflt_value":null,"name":"score","notnull":false,"pk":0,"type":"REAL"},{"cid":3,"default":null,"dflt_value":null,"name":"n","notnull":false,"pk":0,"type":"INTEGER"},`+
			`{"cid":4,"default":null,"dflt_value":null,"name":"b","notnull":false,"pk":0,"type":"BLOB"}]`)

	// SQLite made no file beside it (no -journal, -wal or -shm): it never
	// opened one by name.
	if entries, err := os.ReadDir(filepath.Join(f.ws.Root(), "data")); err != nil || len(entries) != 1 || entries[0].Name() != "app.db" {
		t.Errorf("data/ holds %v (%v); want app.db alone", entries, err)
	}
	// The file on disk is a database of its own: the driver opens it by
	// name here (the test, not the module) and sees the rows.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(f.ws.Root(), "data/app.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil || n != 3 {
		t.Errorf("the file read by another program: %d rows, %v", n, err)
	}

	for _, tc := range []struct{ tool, args, want string }{
		{"db__query", sqlArgs(t, "missing.db", "SELECT 1"), "sqlite.query: "},
		{"db__describe", `{"path":"data/app.db","table":"nope"}`, `sqlite.describe_table: data/app.db has no table "nope"`},
		{"db__describe", `{"path":"data/app.db","table":""}`, "sqlite.describe_table: table must be"},
		{"db__query", sqlArgs(t, "data/app.db", "SELECT nonsense FROM t"), "sqlite.query: SQL logic error: no such column: nonsense"},
		{"db__query", sqlArgs(t, "data/app.db", "SELECT ?", map[string]any{"a": 1}), "sqlite.query: params[0]: a dict cannot be bound"},
		{"db__query", sqlArgs(t, "data/app.db", "SELECT ?", json.Number("123456789012345678901234567890")), "does not fit in 64 bits"},
		{"db__execute", sqlArgs(t, "data/app.db", "ATTACH 'other.db' AS o"), "sqlite.execute: ATTACH, DETACH and VACUUM INTO are refused"},
		{"db__execute", sqlArgs(t, "data/app.db", "VACUUM INTO 'copy.db'"), "sqlite.execute: ATTACH, DETACH and VACUUM INTO are refused"},
		{"db__execute", sqlArgs(t, "data/app.db", "PRAGMA max_page_count = 1000000000"), "sqlite.execute: PRAGMA max_page_count may not be set"},
		{"db__execute", sqlArgs(t, "data/app.db", "PRAGMA journal_mode = WAL"), "sqlite.execute: PRAGMA journal_mode may not be set"},
	} {
		txt, isErr, _ := f.call(t, tc.tool, tc.args)
		if !isErr || !strings.Contains(txt, tc.want) {
			t.Errorf("%s %s: %q isError=%v; want an error with %q", tc.tool, tc.args, txt, isErr, tc.want)
		}
	}
	for _, name := range []string{"other.db", "copy.db"} {
		if _, err := os.Stat(filepath.Join(f.ws.Root(), name)); err == nil {
			t.Errorf("%s was created", name)
		}
	}
}

// TestSQLiteInjectionStaysData: a parameter written as SQL is stored and
// read back as a string; the table it tries to drop is still there.
func TestSQLiteInjectionStaysData(t *testing.T) {
	f := start(t, map[string]string{"db.star": sqliteExt}, nil)
	f.call(t, "db__execute", sqlArgs(t, "x.db", "CREATE TABLE t (name TEXT)"))
	evil := "x'); DROP TABLE t; --"
	if txt, isErr, _ := f.call(t, "db__execute", sqlArgs(t, "x.db", "INSERT INTO t VALUES (?)", evil)); isErr {
		t.Fatal(txt)
	}
	txt, isErr, _ := f.call(t, "db__query", sqlArgs(t, "x.db", "SELECT name FROM t WHERE name = ?", evil))
	want, _ := json.Marshal([]map[string]string{{"name": evil}})
	if isErr || txt != string(want) {
		t.Errorf("the injection attempt: %q %v; want %s", txt, isErr, want)
	}
	if txt, _, _ := f.call(t, "db__tables", `{"path":"x.db"}`); txt != `[{"name":"t"}]` {
		t.Errorf("tables after the attempt: %s", txt)
	}
}

// TestSQLitePathsStayInside: "..", an absolute path and a planted symlink
// never reach a database outside the workspace, for reading or writing.
func TestSQLitePathsStayInside(t *testing.T) {
	f := start(t, map[string]string{"db.star": sqliteExt}, nil)
	outside := filepath.Join(t.TempDir(), "outside.db")
	func() {
		db, err := sql.Open("sqlite", outside)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec("CREATE TABLE secret (v TEXT); INSERT INTO secret VALUES ('s3cret')"); err != nil {
			t.Fatal(err)
		}
	}()
	before, err := os.ReadFile(outside)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.ws.Root(), "link.db")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(f.ws.Root(), "linkdir")); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(f.ws.Root(), outside)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{rel, "../outside.db", "link.db", "linkdir/outside.db", outside} {
		// The escapes are refused as such; the absolute path names a
		// database inside the workspace, which has no table secret.
		want := "path escapes the workspace: " + path
		if path == outside {
			want = ""
		}
		for _, tool := range []string{"db__query", "db__execute"} {
			txt, isErr, _ := f.call(t, tool, sqlArgs(t, path, "SELECT v FROM secret"))
			if !isErr || strings.Contains(txt, "s3cret") || !strings.Contains(txt, want) {
				t.Errorf("%s %s: %q isError=%v; want an error with %q", tool, path, txt, isErr, want)
			}
		}
		txt, isErr, _ := f.call(t, "db__execute", sqlArgs(t, path, "CREATE TABLE planted (x)"))
		if path != outside && (!isErr || !strings.Contains(txt, "sqlite.execute: "+want)) {
			t.Errorf("execute %s: %q isError=%v", path, txt, isErr)
		}
	}
	// An absolute path outside the root is read as relative to it (the
	// path rules of docs/protocol.md): the table was made in the workspace.
	if _, err := os.Stat(filepath.Join(f.ws.Root(), outside)); err != nil {
		t.Errorf("the absolute path's database is not inside the workspace: %v", err)
	}
	after, err := os.ReadFile(outside)
	if err != nil || string(after) != string(before) {
		t.Errorf("the database outside changed (%v)", err)
	}
}

// TestSQLiteReadOnly: a read-only caller (a read-only token's workspace)
// reads, and its execute is refused without touching the file.
func TestSQLiteReadOnly(t *testing.T) {
	// Without an executor the tools run no commands, which a read-only
	// token may not.
	f := start(t, map[string]string{"db.star": sqliteExt}, func(o *Options) { o.Executor = nil })
	if txt, isErr, _ := f.call(t, "db__execute", sqlArgs(t, "r.db", "CREATE TABLE t (x); INSERT INTO t VALUES (1)")); isErr {
		t.Fatal(txt)
	}
	before, _ := os.ReadFile(filepath.Join(f.ws.Root(), "r.db"))
	// The call a read-only token's request gets: admission gives its
	// workspace and builds its registry call.
	caller := admit.Caller{Identity: httpguard.Identity{Name: "ro", ReadOnly: true}}
	roWS, release, err := caller.Workspace(f.ws)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	call := func(tool, args string) (string, bool) {
		res, err := f.reg.Call(context.Background(), tool, caller.Call("rest", roWS, json.RawMessage(args)))
		if err != nil {
			t.Fatal(err)
		}
		return textOf(res), res.IsError
	}
	if txt, isErr := call("db__query", sqlArgs(t, "r.db", "SELECT x FROM t")); isErr || txt != `[{"x":1}]` {
		t.Errorf("read-only query: %q %v", txt, isErr)
	}
	for _, path := range []string{"r.db", "new.db"} {
		txt, isErr := call("db__sneaky", sqlArgs(t, path, "INSERT INTO t VALUES (2)"))
		if !isErr || !strings.Contains(txt, "sqlite.execute: ") || !strings.Contains(txt, "read-only") {
			t.Errorf("read-only execute on %s: %q %v", path, txt, isErr)
		}
	}
	// The same through a workspace made read-only directly.
	ro := fsops.ReadOnly(f.ws)
	res, err := f.reg.Call(context.Background(), "db__execute", registry.Call{Args: json.RawMessage(sqlArgs(t, "r.db", "DELETE FROM t")), Workspace: ro})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "read-only") {
		t.Errorf("execute in fsops.ReadOnly: %v %+v", err, res)
	}
	after, _ := os.ReadFile(filepath.Join(f.ws.Root(), "r.db"))
	if string(after) != string(before) {
		t.Error("the read-only calls changed the file")
	}
	if _, err := os.Stat(filepath.Join(f.ws.Root(), "new.db")); err == nil {
		t.Error("a read-only execute created new.db")
	}
}

// TestSQLiteBounds: a query past the row limit, a file that is not a
// database, one in WAL mode, and a statement past its deadline all fail
// with what is wrong.
func TestSQLiteBounds(t *testing.T) {
	f := start(t, map[string]string{"db.star": sqliteExt}, nil)
	if txt, isErr, _ := f.call(t, "db__execute", sqlArgs(t, "b.db", "CREATE TABLE t (x)")); isErr {
		t.Fatal(txt)
	}
	txt, isErr, _ := f.call(t, "db__query", sqlArgs(t, "b.db",
		"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT ?) SELECT x FROM c", MaxSQLRows+1))
	if !isErr || !strings.Contains(txt, "more than 10000 rows") {
		t.Errorf("too many rows: %.200q %v", txt, isErr)
	}
	txt, isErr, _ = f.call(t, "db__query", sqlArgs(t, "b.db",
		"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 10) SELECT x, zeroblob(1000000) AS z FROM c"))
	if !isErr || !strings.Contains(txt, "more than 4194304 bytes") {
		t.Errorf("too many bytes: %.200q %v", txt, isErr)
	}
	// Temporary tables are bounded like the database: in the daemon's
	// memory, 40 MiB of them would be past the 32 MiB the file may hold.
	txt, isErr, _ = f.call(t, "db__query", sqlArgs(t, "b.db",
		"CREATE TEMP TABLE big AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 40) SELECT zeroblob(1 << 20) AS z FROM c"))
	if !isErr || !strings.Contains(txt, "database or disk is full") {
		t.Errorf("40 MiB of temporary table: %.200q %v", txt, isErr)
	}
	os.WriteFile(filepath.Join(f.ws.Root(), "text.db"), []byte(strings.Repeat("not a database ", 20)), 0o644)
	if txt, isErr, _ := f.call(t, "db__query", sqlArgs(t, "text.db", "SELECT 1")); !isErr || !strings.Contains(txt, "text.db is not a SQLite database") {
		t.Errorf("a text file: %q %v", txt, isErr)
	}
	wal := filepath.Join(f.ws.Root(), "wal.db")
	func() {
		db, err := sql.Open("sqlite", wal)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec("PRAGMA journal_mode=WAL; CREATE TABLE t (x)"); err != nil {
			t.Fatal(err)
		}
	}()
	if txt, isErr, _ := f.call(t, "db__query", sqlArgs(t, "wal.db", "SELECT 1")); !isErr || !strings.Contains(txt, "wal.db is in WAL mode") {
		t.Errorf("a WAL database: %q %v", txt, isErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	txt, isErr, _ = f.callCtx(t, ctx, "db__query", sqlArgs(t, "b.db", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"))
	// The registry runs the handler on this goroutine: that it returned at
	// all is the statement interrupted.
	if !isErr || !strings.Contains(txt, "cancelled") || time.Since(began) > 10*time.Second {
		t.Errorf("past the deadline: %q %v after %v", txt, isErr, time.Since(began))
	}
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		b.WriteString(c.(*mcp.TextContent).Text)
	}
	return b.String()
}

// FuzzSQLiteImage: whatever bytes a database file of the workspace holds,
// the sqlite module reads and changes it with an error or a result, never
// a crash, and what execute writes back is within the size bound. SQLite's
// coverage makes nearly every input new, and minimising each would take
// the fuzzing time; run it as
//
//	go test -run '^$' -fuzz FuzzSQLiteImage -fuzzminimizetime 1x ./extensions/
func FuzzSQLiteImage(f *testing.F) {
	dir := f.TempDir()
	seed := filepath.Join(dir, "seed.db")
	db, err := sql.Open("sqlite", seed)
	if err != nil {
		f.Fatal(err)
	}
	_, err = db.Exec("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT); CREATE INDEX tv ON t (v); INSERT INTO t (v) VALUES ('a'), ('b'), (NULL)")
	db.Close()
	if err != nil {
		f.Fatal(err)
	}
	img, err := os.ReadFile(seed)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(img)
	f.Add(img[:100])
	f.Add([]byte(sqliteHeader))
	wal := append([]byte(nil), img...)
	wal[18], wal[19] = 2, 2
	f.Add(wal)
	root := filepath.Join(dir, "ws")
	if err := os.Mkdir(root, 0o755); err != nil {
		f.Fatal(err)
	}
	ws, err := fsops.NewDir(root, fsops.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer ws.Close()
	f.Fuzz(func(t *testing.T, data []byte) { sqliteImageCase(t, ws, root, data) })
}

// sqliteImageCase is one input of FuzzSQLiteImage.
func sqliteImageCase(t *testing.T, ws fsops.Workspace, root string, data []byte) {
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(root, "x.db"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := openSQLite(ctx, ws, "sqlite.query", "x.db", false); err == nil {
		for _, q := range []string{"SELECT * FROM sqlite_schema", "SELECT * FROM t"} {
			if rows, err := s.conn.QueryContext(ctx, q); err == nil {
				sqlRows("sqlite.query", rows)
				rows.Close()
			}
		}
		s.close()
	}
	s, err := openSQLite(ctx, ws, "sqlite.execute", "x.db", true)
	if err != nil {
		return
	}
	_, err = s.conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS z (x); INSERT INTO z VALUES (randomblob(100))")
	if err == nil {
		err = s.writeBack("sqlite.execute", "x.db")
	}
	s.close()
	if err != nil {
		return
	}
	// What execute wrote back is a database holding its change.
	fi, err := os.Stat(filepath.Join(root, "x.db"))
	if err != nil || fi.Size() > MaxSQLiteBytes {
		t.Fatalf("written back: %v %v", fi, err)
	}
	r, err := openSQLite(ctx, ws, "sqlite.query", "x.db", false)
	if err != nil {
		t.Fatalf("what execute wrote back does not open: %v", err)
	}
	defer r.close()
	var n int
	if err := r.conn.QueryRowContext(ctx, "SELECT count(*) FROM z").Scan(&n); err != nil || n < 1 {
		t.Fatalf("what execute wrote back lacks its row: %d %v", n, err)
	}
}

// TestSQLiteRefusesFiles: a file past MaxSQLiteBytes and a directory are
// refused by name before anything is read, and the file is unchanged.
func TestSQLiteRefusesFiles(t *testing.T) {
	f := start(t, map[string]string{"db.star": sqliteExt}, nil)
	big := filepath.Join(f.ws.Root(), "big.db")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxSQLiteBytes+1); err != nil { // sparse
		t.Fatal(err)
	}
	want := fmt.Sprintf("big.db holds %d bytes; the limit is %d", MaxSQLiteBytes+1, MaxSQLiteBytes)
	for _, tool := range []string{"db__query", "db__execute"} {
		if txt, isErr, _ := f.call(t, tool, sqlArgs(t, "big.db", "SELECT 1")); !isErr || !strings.Contains(txt, want) {
			t.Errorf("%s of a file past the limit: %q %v", tool, txt, isErr)
		}
	}
	if info, err := os.Stat(big); err != nil || info.Size() != MaxSQLiteBytes+1 {
		t.Errorf("the file after the refusals: %v %v", info, err)
	}
	os.Mkdir(filepath.Join(f.ws.Root(), "dir.db"), 0o755)
	if txt, isErr, _ := f.call(t, "db__query", sqlArgs(t, "dir.db", "SELECT 1")); !isErr || !strings.Contains(txt, "dir.db is not a regular file") {
		t.Errorf("a directory: %q %v", txt, isErr)
	}
}

// TestSQLiteWaitsEndAtTheDeadline: a call waiting for a writer of the same
// file, or for one of the MaxSQLiteOpen databases the daemon holds at once,
// gives up at its own deadline (the registry answers that the call was
// cancelled); here the writer and the slots are held for ever, so a wait
// that did not end with the deadline would hang the test.
func TestSQLiteWaitsEndAtTheDeadline(t *testing.T) {
	f := start(t, map[string]string{"db.star": sqliteExt}, nil)
	if txt, isErr, _ := f.call(t, "db__execute", sqlArgs(t, "w.db", "CREATE TABLE t (x)")); isErr {
		t.Fatal(txt)
	}
	file, err := f.ws.OpenFile("w.db", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	info, err := file.Stat()
	file.Close()
	if err != nil {
		t.Fatal(err)
	}
	wait := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		began := time.Now()
		txt, isErr, _ := f.callCtx(t, ctx, "db__query", sqlArgs(t, "w.db", "SELECT 1"))
		if !isErr || !strings.Contains(txt, "cancelled: context deadline exceeded") || time.Since(began) > 5*time.Second {
			t.Errorf("waiting for %s: %q %v after %v", what, txt, isErr, time.Since(began))
		}
	}
	l := sqliteLock(info.ID())
	if err := l.Acquire(context.Background(), sqliteWriter); err != nil { // a writer of the file
		t.Fatal(err)
	}
	wait("a writer of w.db")
	l.Release(sqliteWriter)
	if err := sqliteOpen.Acquire(context.Background(), MaxSQLiteOpen); err != nil { // every database slot
		t.Fatal(err)
	}
	wait("a database slot")
	sqliteOpen.Release(MaxSQLiteOpen)
	if txt, isErr, _ := f.call(t, "db__query", sqlArgs(t, "w.db", "SELECT count(*) AS n FROM t")); isErr || txt != `[{"n":0}]` {
		t.Errorf("after the waits: %q %v", txt, isErr)
	}
}

package extensions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/agentbe/agentbe-daemon/tools/registry"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// inChild runs the test named name again in a child process of this test
// binary, with SQLite left alone by TestMain (sqliteChildEnv), and reports
// whether this is that child. The parent fails when the child does.
func inChild(t *testing.T, name string) bool {
	t.Helper()
	if os.Getenv(sqliteChildEnv) != "" {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), sqliteChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("the child process: %v\n%s", err, out)
	}
	return false
}

// TestSQLiteConcurrentFirstUse: eight calls that each open a database,
// all at once as the first uses in the process, all run with SQLite's heap
// limit in force: none opens a database before sqliteHeap has set it
// (sync.OnceValue makes the others wait for the first), and every one
// succeeds.
func TestSQLiteConcurrentFirstUse(t *testing.T) {
	if !inChild(t, "TestSQLiteConcurrentFirstUse") {
		return
	}
	f := start(t, map[string]string{"db.star": sqliteExt}, nil)
	if sqliteStarted(t) {
		t.Fatal("SQLite initialized before any call opened a database")
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args, _ := json.Marshal(map[string]any{"path": fmt.Sprintf("db%d.db", i), "sql": "CREATE TABLE t (x)"})
			res, err := f.reg.Call(context.Background(), "db__execute", registry.Call{Args: args, Workspace: f.ws})
			switch {
			case err != nil:
				errs <- err.Error()
			case res.IsError:
				errs <- res.Content[0].(*mcp.TextContent).Text
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	tls := libc.NewTLS()
	defer tls.Close()
	if got := sqlite3.Xsqlite3_hard_heap_limit64(tls, -1); got != MaxSQLiteHeap {
		t.Fatalf("SQLite's hard heap limit is %d, want MaxSQLiteHeap (%d)", got, int64(MaxSQLiteHeap))
	}
}

// TestSQLiteLimitFailureReported: when the heap limit cannot be put in
// force (something in the process initialized SQLite first), every call
// that would open a database is refused with the reason, the first and
// the later ones alike, no database is opened without the limit, and the
// provider goes on serving (no panic).
func TestSQLiteLimitFailureReported(t *testing.T) {
	if !inChild(t, "TestSQLiteLimitFailureReported") {
		return
	}
	tls := libc.NewTLS()
	defer tls.Close()
	if rc := sqlite3.Xsqlite3_initialize(tls); rc != sqlite3.SQLITE_OK {
		t.Fatalf("sqlite3_initialize: code %d", rc)
	}
	f := start(t, map[string]string{"db.star": sqliteExt}, nil)
	for i := range 2 {
		txt, isErr, _ := f.call(t, "db__execute", sqlArgs(t, "first.db", "CREATE TABLE t (x)"))
		if !isErr || !strings.Contains(txt, "memory accounting on failed") {
			t.Fatalf("call %d with SQLite initialized before the limit: error %v %q, want the limit's failure", i+1, isErr, txt)
		}
	}
	// Refused before the file is opened: not even created.
	if _, err := os.Stat(filepath.Join(f.ws.Root(), "first.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the database file was touched without the limit: %v", err)
	}
}

// FuzzValidNameIsThePattern: validName accepts exactly what
// ^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$ matches, on any input, invalid UTF-8
// and lengths past the bound included.
func FuzzValidNameIsThePattern(f *testing.F) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)
	for _, s := range []string{"", "a", "_a", "a_b-c", strings.Repeat("x", 32), strings.Repeat("x", 33), "a\n", "\xff", "é", "a b", strings.Repeat("é", 16)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := validName(name), pattern.MatchString(name); got != want {
			t.Fatalf("validName(%q) = %v, the pattern = %v", name, got, want)
		}
	})
}

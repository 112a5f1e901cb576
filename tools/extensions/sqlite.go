package extensions

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"golang.org/x/sync/semaphore"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/fsops"
)

// MaxSQLiteBytes bounds a database file of the sqlite module, before and
// after a change: the file is read whole into memory (see openSQLite).
const MaxSQLiteBytes = 32 << 20

// The sqlite module never lets SQLite open a file by name. SQLite's unix
// VFS resolves whatever name it is given, symlinks included, before it
// opens it (unixFullPathname follows each link with lstat and readlink):
// handed /proc/self/fd/N it reads the link back to the file's path and
// opens that path again, so the descriptor fsops validated would not be
// the file SQLite uses, and a directory swapped for a link in between would
// lead it out of the workspace. Its rollback journal and WAL files would be
// opened by name beside it too. So the module reads the database through
// the validated descriptor into an in-memory database (sqlite3_deserialize),
// runs the statement there, and for execute writes the changed image back
// through the same descriptor. The in-memory database keeps its journal in
// memory; like journal_mode=MEMORY on a file, a daemon that dies in the
// middle of writing the image back can leave the file damaged. ATTACH (and
// VACUUM INTO, which attaches) is refused by the authorizer: it would open
// a file by name.

// sqliteLocks serialise the calls on one file (its device and inode)
// inside the daemon: readers share (each takes one unit), a writer's
// read-change-write-back is alone (it takes them all). Striped, so that the
// table never grows; semaphores, so that a call waiting for another gives
// up at its own deadline. Made on the first database opened, not at start.
var sqliteLocks = sync.OnceValue(func() (l *[64]*semaphore.Weighted) {
	l = new([64]*semaphore.Weighted)
	for i := range l {
		l[i] = semaphore.NewWeighted(sqliteWriter)
	}
	return l
})

// sqliteWriter is the weight of a writer: all of a stripe.
const sqliteWriter = 1 << 20

func sqliteLock(id fsops.FileID) *semaphore.Weighted {
	l := sqliteLocks()
	return l[(id.Dev*31+id.Ino)%uint64(len(l))]
}

// MaxSQLiteOpen bounds the databases loaded at once across the daemon:
// each holds its file's image and an in-memory copy (a few times
// MaxSQLiteBytes at most), so together they hold a bounded amount.
const MaxSQLiteOpen = 4

var sqliteOpen = semaphore.NewWeighted(MaxSQLiteOpen)

// sqliteHeader is the first 16 bytes of every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// refusedPragma says the pragma may not be set by a statement: it would
// lift the size bound (max_page_count), change process-wide settings (the
// heap limits, threads), or make SQLite open files by name (the
// directories, journal and locking modes). A switch, not a map literal:
// a map of this size is built at every start, with an allocation that
// varies with the hash seed.
func refusedPragma(name string) bool {
	switch name {
	case "max_page_count", "mmap_size", "cache_size", "temp_store",
		"temp_store_directory", "data_store_directory", "hard_heap_limit",
		"soft_heap_limit", "threads", "journal_mode", "locking_mode",
		"cache_spill", "page_size":
		return true
	}
	return false
}

// sqliteDB is one call's in-memory copy of a database file.
type sqliteDB struct {
	db      *sql.DB
	conn    *sql.Conn
	f       fsops.File
	image   []byte // the file as read
	unlock  func()
	refused string // why the authorizer refused the last statement
}

// openSQLite opens the file through fsops (creating it for a write: an
// empty file is an empty database), takes the file's lock, reads it
// through the descriptor and loads it into an in-memory database with the
// bounds and the authorizer in place.
func openSQLite(ctx context.Context, ws fsops.Workspace, fn, path string, write bool) (_ *sqliteDB, err error) {
	if err := sqliteHeap(); err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR | os.O_CREATE
	}
	f, err := ws.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", fn, errcode.Sentence(err))
	}
	s := &sqliteDB{f: f}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %s", fn, errcode.Sentence(err))
	}
	if !info.Mode.IsRegular() {
		return nil, fmt.Errorf("%s: %s is not a regular file", fn, path)
	}
	l, weight := sqliteLock(info.ID()), int64(1)
	if write {
		weight = sqliteWriter
	}
	if err := l.Acquire(ctx, weight); err != nil {
		return nil, fmt.Errorf("%s: waiting for another call on %s: %v", fn, path, err)
	}
	if err := sqliteOpen.Acquire(ctx, 1); err != nil {
		l.Release(weight)
		return nil, fmt.Errorf("%s: waiting for one of the %d databases open at once to close: %v", fn, MaxSQLiteOpen, err)
	}
	s.unlock = func() { sqliteOpen.Release(1); l.Release(weight) }
	// The size again under the lock: a writer may have changed it.
	if info, err = f.Stat(); err != nil {
		return nil, fmt.Errorf("%s: %s", fn, errcode.Sentence(err))
	}
	if info.Size > MaxSQLiteBytes {
		return nil, fmt.Errorf("%s: %s holds %d bytes; the limit is %d", fn, path, info.Size, MaxSQLiteBytes)
	}
	s.image = make([]byte, info.Size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, info.Size), s.image); err != nil {
		return nil, fmt.Errorf("%s: reading %s: %v", fn, path, err)
	}
	if len(s.image) > 0 {
		if len(s.image) < 100 || !bytes.HasPrefix(s.image, []byte(sqliteHeader)) {
			return nil, fmt.Errorf("%s: %s is not a SQLite database", fn, path)
		}
		if s.image[18] == 2 || s.image[19] == 2 {
			return nil, fmt.Errorf("%s: %s is in WAL mode, whose changes live in a -wal file beside it that this module does not read; "+
				"make it a rollback-journal database first (PRAGMA journal_mode=DELETE in the program that uses it)", fn, path)
		}
	}
	// A fresh in-memory database per call: nothing is shared between calls
	// or kept after one.
	if s.db, err = sql.Open("sqlite", ":memory:"); err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	s.db.SetMaxOpenConns(1)
	if s.conn, err = s.db.Conn(ctx); err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	if len(s.image) > 0 {
		err = s.conn.Raw(func(dc any) error {
			d, ok := dc.(interface{ Deserialize([]byte) error })
			if !ok {
				return errors.New("the driver cannot load a database image")
			}
			return d.Deserialize(s.image)
		})
		if err != nil {
			if oom := outOfMemory(fn, err); oom != nil {
				return nil, oom
			}
			return nil, fmt.Errorf("%s: loading %s: %v", fn, path, err)
		}
	}
	var pageSize int64
	if err := s.conn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
		return nil, fmt.Errorf("%s: %s: %v", fn, path, err)
	}
	// The database may not grow past MaxSQLiteBytes ("database or disk is
	// full"), nor may its temporary tables (the temp schema is a database
	// of its own, in the daemon's memory, with its own page count); a
	// value may not be longer; no database may be attached; and temporary
	// tables and sorts stay in memory, never in a file.
	for _, q := range []string{
		fmt.Sprintf("PRAGMA max_page_count = %d", MaxSQLiteBytes/pageSize),
		"PRAGMA temp_store = MEMORY",
		fmt.Sprintf("PRAGMA temp.max_page_count = %d", MaxSQLiteBytes/pageSize),
	} {
		if _, err := s.conn.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s: %s: %v", fn, q, err)
		}
	}
	for id, v := range map[int]int{sqlite3.SQLITE_LIMIT_LENGTH: MaxSQLiteBytes, sqlite3.SQLITE_LIMIT_ATTACHED: 0, sqlite3.SQLITE_LIMIT_SQL_LENGTH: 1 << 20} {
		if _, err := msqlite.Limit(s.conn, id, v); err != nil {
			return nil, fmt.Errorf("%s: %v", fn, err)
		}
	}
	err = s.conn.Raw(func(dc any) error {
		a, ok := dc.(msqlite.AuthorizerRegisterer)
		if !ok {
			return errors.New("the driver has no authorizer")
		}
		return a.RegisterAuthorizer(s.authorize)
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	return s, nil
}

// authorize refuses what would reach past the one file or lift a bound.
func (s *sqliteDB) authorize(action msqlite.AuthorizerActionCode, arg1, arg2, _, _ string) msqlite.AuthorizerReturnCode {
	switch {
	case action == msqlite.AuthAttach || action == msqlite.AuthDetach:
		s.refused = "ATTACH, DETACH and VACUUM INTO are refused: the module works on the one file it was given"
		return msqlite.AuthorizerDeny
	case action == msqlite.AuthPragma && arg2 != "" && refusedPragma(strings.ToLower(arg1)):
		s.refused = fmt.Sprintf("PRAGMA %s may not be set here (the module's bounds and in-memory journal depend on it)", strings.ToLower(arg1))
		return msqlite.AuthorizerDeny
	}
	return msqlite.AuthorizerOK
}

// fail is err with the authorizer's reason when it refused the statement.
func (s *sqliteDB) fail(fn string, err error) error {
	if oom := outOfMemory(fn, err); oom != nil {
		return oom
	}
	if s.refused != "" {
		return fmt.Errorf("%s: %s", fn, s.refused)
	}
	return fmt.Errorf("%s: %v", fn, err)
}

// writeBack writes the in-memory database over the file through the
// validated descriptor, if it changed.
func (s *sqliteDB) writeBack(fn, path string) error {
	var image []byte
	err := s.conn.Raw(func(dc any) error {
		d, ok := dc.(interface{ Serialize() ([]byte, error) })
		if !ok {
			return errors.New("the driver cannot save a database image")
		}
		var err error
		image, err = d.Serialize()
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: saving %s: %v", fn, path, err)
	}
	if bytes.Equal(image, s.image) {
		return nil
	}
	if len(image) > MaxSQLiteBytes {
		return fmt.Errorf("%s: %s would hold %d bytes; the limit is %d", fn, path, len(image), MaxSQLiteBytes)
	}
	// The write is not bound to the call's deadline: stopping half way
	// would leave the file damaged.
	if _, err := s.f.WriteAt(image, 0); err != nil {
		return fmt.Errorf("%s: writing %s: %s", fn, path, errcode.Sentence(err))
	}
	if len(image) < len(s.image) {
		if err := s.f.Truncate(int64(len(image))); err != nil {
			return fmt.Errorf("%s: writing %s: %s", fn, path, errcode.Sentence(err))
		}
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("%s: writing %s: %s", fn, path, errcode.Sentence(err))
	}
	return nil
}

func (s *sqliteDB) close() {
	if s.conn != nil {
		s.conn.Close()
	}
	if s.db != nil {
		s.db.Close()
	}
	if s.unlock != nil {
		s.unlock()
	}
	s.f.Close()
}

// sqliteModule: sqlite.query, execute, list_tables, describe_table on
// database files of the call's workspace.
func (p *Provider) sqliteModule() *starlarkstruct.Module {
	type args struct {
		path, sql, table string
		params           []any
	}
	// run unpacks the arguments, opens the file and calls body on it.
	run := func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple, write bool, unpack func(*args) []any,
		body func(ctx context.Context, s *sqliteDB, x *args) (starlark.Value, error)) (starlark.Value, error) {
		var x args
		var params starlark.Value
		pairs := unpack(&x)
		if pairs == nil {
			pairs = []any{"path", &x.path, "sql", &x.sql, "params?", &params}
		}
		if err := starlark.UnpackArgs(b.Name(), a, kw, pairs...); err != nil {
			return nil, err
		}
		ctx, _, ws, err := callState(thread, b.Name())
		if err != nil {
			return nil, err
		}
		if ws == nil {
			return nil, fmt.Errorf("%s: this call has no workspace", b.Name())
		}
		if x.params, err = sqlParams(b.Name(), params); err != nil {
			return nil, err
		}
		s, err := openSQLite(ctx, ws, b.Name(), x.path, write)
		if err != nil {
			return nil, err
		}
		defer s.close()
		return body(ctx, s, &x)
	}
	none := func(*args) []any { return nil }
	return module("sqlite", map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
		"query": func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return run(thread, b, a, kw, false, none, func(ctx context.Context, s *sqliteDB, x *args) (starlark.Value, error) {
				rows, err := s.conn.QueryContext(ctx, x.sql, x.params...)
				if err != nil {
					return nil, s.fail(b.Name(), err)
				}
				defer rows.Close()
				v, err := sqlRows(b.Name(), rows)
				if oom := outOfMemory(b.Name(), err); oom != nil {
					return nil, oom
				}
				return v, err
			})
		},
		"execute": func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return run(thread, b, a, kw, true, none, func(ctx context.Context, s *sqliteDB, x *args) (starlark.Value, error) {
				res, err := s.conn.ExecContext(ctx, x.sql, x.params...)
				if err != nil {
					return nil, s.fail(b.Name(), err)
				}
				if err := s.writeBack(b.Name(), x.path); err != nil {
					return nil, err
				}
				return sqlExecResult(res), nil
			})
		},
		"list_tables": func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			unpack := func(x *args) []any { return []any{"path", &x.path} }
			return run(thread, b, a, kw, false, unpack, func(ctx context.Context, s *sqliteDB, x *args) (starlark.Value, error) {
				rows, err := s.conn.QueryContext(ctx, "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
				if err != nil {
					return nil, s.fail(b.Name(), err)
				}
				defer rows.Close()
				// Rows of {"name": ...}, as starlark-mcp's list_tables gives
				// them (table["name"]).
				var names []starlark.Value
				for rows.Next() {
					var n string
					if err := rows.Scan(&n); err != nil {
						return nil, s.fail(b.Name(), err)
					}
					d := starlark.NewDict(1)
					d.SetKey(starlark.String("name"), starlark.String(n))
					names = append(names, d)
				}
				if err := rows.Err(); err != nil {
					return nil, s.fail(b.Name(), err)
				}
				return starlark.NewList(names), nil
			})
		},
		"describe_table": func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			unpack := func(x *args) []any { return []any{"path", &x.path, "table", &x.table} }
			return run(thread, b, a, kw, false, unpack, func(ctx context.Context, s *sqliteDB, x *args) (starlark.Value, error) {
				if x.table == "" || len(x.table) > 1024 || strings.ContainsRune(x.table, 0) {
					return nil, fmt.Errorf("%s: table must be a table's name (1 to 1024 bytes, no NUL)", b.Name())
				}
				// The name is bound as a parameter of the table-valued
				// pragma function, never written into the SQL.
				rows, err := s.conn.QueryContext(ctx, `SELECT cid, name, type, "notnull", dflt_value, pk FROM pragma_table_info(?) ORDER BY cid`, x.table)
				if err != nil {
					return nil, s.fail(b.Name(), err)
				}
				defer rows.Close()
				var cols []starlark.Value
				for rows.Next() {
					var name, typ string
					var cid, notnull, pk int64
					var dflt sql.NullString
					if err := rows.Scan(&cid, &name, &typ, &notnull, &dflt, &pk); err != nil {
						return nil, s.fail(b.Name(), err)
					}
					// PRAGMA table_info's columns (cid, name, type, notnull,
					// dflt_value, pk), as starlark-mcp gives them, and
					// "default" beside dflt_value.
					d := starlark.NewDict(7)
					d.SetKey(starlark.String("cid"), starlark.MakeInt64(cid))
					d.SetKey(starlark.String("name"), starlark.String(name))
					d.SetKey(starlark.String("type"), starlark.String(typ))
					d.SetKey(starlark.String("notnull"), starlark.Bool(notnull != 0))
					var def starlark.Value = starlark.None
					if dflt.Valid {
						def = starlark.String(dflt.String)
					}
					d.SetKey(starlark.String("default"), def)
					d.SetKey(starlark.String("dflt_value"), def)
					d.SetKey(starlark.String("pk"), starlark.MakeInt64(pk))
					cols = append(cols, d)
				}
				if err := rows.Err(); err != nil {
					return nil, s.fail(b.Name(), err)
				}
				if len(cols) == 0 {
					return nil, fmt.Errorf("%s: %s has no table %q (sqlite.list_tables names them)", b.Name(), x.path, x.table)
				}
				return starlark.NewList(cols), nil
			})
		},
	})
}

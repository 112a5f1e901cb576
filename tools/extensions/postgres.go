package extensions

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/stdlib"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/agentbe/agentbe-daemon/netguard"
)

// DefaultPostgresPort is the port the postgres module's door admits when
// the daemon gives it none of its own (Options.PostgresNet).
const DefaultPostgresPort = 5432

// maxPostgresMessage bounds a message from the server: a result's values
// (MaxSQLResultBytes) and a row's framing.
const maxPostgresMessage = MaxSQLResultBytes + 64<<10

// postgresKeys are the keys a connection URL may carry. The others of
// libpq make pgx read files of the daemon's (passfile, servicefile,
// sslkey, sslcert, sslrootcert) or change where it connects (service,
// target_session_attrs): refused before anything is read or dialled.
var postgresKeys = []string{"host", "port", "user", "password", "dbname", "sslmode", "connect_timeout", "application_name"}

// postgresConfig parses conn, a postgres:// URL, into a pgx configuration
// whose every connection goes through door. Nothing of the daemon's own is
// sent: pgx fills what the URL leaves out from the daemon's environment
// (PGPASSWORD), its ~/.pgpass and ~/.postgresql; the password is always
// the URL's (or none) and no client certificate is presented. A host that
// is a Unix socket is refused; a host the extension does not list in
// allowed_db_hosts too.
func postgresConfig(fn, conn string, ext *Extension, operatorHosts []string, door *netguard.Client) (*pgx.ConnConfig, error) {
	if !strings.HasPrefix(conn, "postgres://") && !strings.HasPrefix(conn, "postgresql://") {
		return nil, fmt.Errorf("%s: conn must be a postgres:// URL (postgres://user:password@host:port/dbname?sslmode=...)", fn)
	}
	u, err := url.Parse(conn)
	if err != nil {
		return nil, fmt.Errorf("%s: conn is not a URL: %v", fn, redactURLError(err))
	}
	password, _ := u.User.Password()
	if p := u.Query().Get("password"); p != "" {
		password = p
	}
	cfg, err := pgx.ParseConfigWithOptions(conn, pgx.ParseConfigOptions{ParseConfigOptions: pgconn.ParseConfigOptions{ConnStringAllowedKeys: postgresKeys}})
	if err != nil {
		return nil, fmt.Errorf("%s: conn: %v (the keys it may hold: %s)", fn, err, strings.Join(postgresKeys, ", "))
	}
	cfg.Password = password
	hosts := []string{cfg.Host}
	for _, fb := range cfg.Fallbacks {
		hosts = append(hosts, fb.Host)
	}
	if cfg.TLSConfig != nil {
		cfg.TLSConfig.Certificates = nil
	}
	for _, fb := range cfg.Fallbacks {
		if fb.TLSConfig != nil {
			fb.TLSConfig.Certificates = nil
		}
	}
	for _, h := range hosts {
		if h == "" || strings.HasPrefix(h, "/") || strings.HasPrefix(h, "@") {
			return nil, fmt.Errorf("%s: conn names no host, or a Unix socket (%q); only TCP connections to a host in allowed_db_hosts are made", fn, h)
		}
		same := func(a string) bool { return strings.EqualFold(a, h) }
		if !slices.ContainsFunc(ext.AllowedDBHosts, same) && !slices.ContainsFunc(operatorHosts, same) {
			return nil, fmt.Errorf("%s: host %q is not in the allowed_db_hosts of extension %s (%v) nor the operator's --extensions-db-hosts (%v)", fn, h, ext.Name, ext.AllowedDBHosts, operatorHosts)
		}
	}
	// A message of the server's is read whole before sqlRows counts a
	// row's values: one row of SELECT repeat('x', 1e9) would be a gigabyte
	// in the daemon (and more as Starlark values) before the 4 MiB bound
	// refused it. No message may be longer than a result may hold.
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		f := pgproto3.NewFrontend(r, w)
		f.SetMaxBodyLen(maxPostgresMessage)
		return f
	}
	// The name goes to the door as it is: netguard resolves it itself and
	// dials only an address it checked.
	cfg.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	cfg.DialFunc = door.Dial
	return cfg, nil
}

// sqlRunner is a connection or a transaction.
type sqlRunner interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// postgresError says what a message longer than maxPostgresMessage was;
// other errors are given as they are (prefixed with fn once).
func postgresError(fn string, err error) error {
	var long *pgproto3.ExceededMaxBodyLenErr
	if errors.As(err, &long) {
		return fmt.Errorf("%s: the server sent a message of %d bytes (a row of the result); the limit is %d: select fewer or shorter columns", fn, long.ActualBodyLen, long.MaxExpectedBodyLen)
	}
	if strings.HasPrefix(err.Error(), fn+": ") {
		return err
	}
	return fmt.Errorf("%s: %v", fn, err)
}

// redactURLError drops the URL (which may hold a password) from a
// url.Parse error.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// postgresModule: postgres.query, execute, list_tables and describe_table,
// one connection per call, dialled through the network door.
func (p *Provider) postgresModule() *starlarkstruct.Module {
	// rows runs query and gives its rows, as postgres.query does.
	rows := func(fn string) func(ctx context.Context, c sqlRunner, query string, params []any) (starlark.Value, error) {
		return func(ctx context.Context, c sqlRunner, query string, params []any) (starlark.Value, error) {
			rows, err := c.QueryContext(ctx, query, params...)
			if err != nil {
				return nil, postgresError(fn, err)
			}
			defer rows.Close()
			out, err := sqlRows(fn, rows)
			if err != nil {
				return nil, postgresError(fn, err)
			}
			return out, nil
		}
	}
	// statement unpacks (conn, sql, params=[]) and runs body.
	statement := func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple, write bool,
		body func(ctx context.Context, c sqlRunner, query string, params []any) (starlark.Value, error)) (starlark.Value, error) {
		var conn, query string
		var params starlark.Value
		if err := starlark.UnpackArgs(b.Name(), a, kw, "conn", &conn, "sql", &query, "params?", &params); err != nil {
			return nil, err
		}
		return p.postgresCall(thread, b.Name(), conn, query, params, write, body)
	}
	// catalog runs one of starlark-mcp's catalog queries: (conn,
	// schema="public") or (conn, table, schema="public"), bound as
	// parameters, never written into the SQL.
	catalog := func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple, withTable bool, query string) (starlark.Value, error) {
		var conn, table string
		schema := "public"
		pairs := []any{"conn", &conn, "schema?", &schema}
		params := starlark.Tuple{}
		if withTable {
			pairs = []any{"conn", &conn, "table", &table, "schema?", &schema}
		}
		if err := starlark.UnpackArgs(b.Name(), a, kw, pairs...); err != nil {
			return nil, err
		}
		params = append(params, starlark.String(schema))
		if withTable {
			params = append(params, starlark.String(table))
		}
		return p.postgresCall(thread, b.Name(), conn, query, params, false, rows(b.Name()))
	}
	return module("postgres", map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){
		"query": func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return statement(thread, b, a, kw, false, rows(b.Name()))
		},
		// execute gives the count of rows the statement changed, an int,
		// as starlark-mcp's does.
		"execute": func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return statement(thread, b, a, kw, true, func(ctx context.Context, c sqlRunner, query string, params []any) (starlark.Value, error) {
				res, err := c.ExecContext(ctx, query, params...)
				if err != nil {
					return nil, postgresError(b.Name(), err)
				}
				n, err := res.RowsAffected()
				if err != nil {
					return nil, postgresError(b.Name(), err)
				}
				return starlark.MakeInt64(n), nil
			})
		},
		"list_tables": func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return catalog(thread, b, a, kw, false, "SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = $1 ORDER BY tablename")
		},
		"describe_table": func(thread *starlark.Thread, b *starlark.Builtin, a starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
			return catalog(thread, b, a, kw, true, `SELECT column_name, data_type, is_nullable, column_default, character_maximum_length
FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`)
		},
	})
}

// postgresCall connects for one call (through the door, to a host the
// extension or the operator allows), and runs body: in a READ ONLY
// transaction that is rolled back for a read-only token's call, which may
// not write at all.
func (p *Provider) postgresCall(thread *starlark.Thread, fn, conn, query string, params starlark.Value,
	write bool, body func(ctx context.Context, c sqlRunner, query string, params []any) (starlark.Value, error)) (starlark.Value, error) {
	ctx, ext, _, err := callState(thread, fn)
	if err != nil {
		return nil, err
	}
	ro, _ := thread.Local(localReadOnly).(bool)
	if ro && write {
		return nil, fmt.Errorf("%s: this token is read-only; it may not change a database", fn)
	}
	args, err := sqlParams(fn, params)
	if err != nil {
		return nil, err
	}
	cfg, err := postgresConfig(fn, conn, ext, p.opts.DBHosts, p.opts.PostgresNet)
	if err != nil {
		return nil, err
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()
	db.SetMaxOpenConns(1)
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: connecting: %v", fn, err)
	}
	defer c.Close()
	if !ro {
		return body(ctx, c, query, args)
	}
	// A read-only token's query runs in a READ ONLY transaction that
	// is rolled back: query takes any statement (DELETE ... RETURNING
	// too), and the token may not change a database. The URL cannot
	// choose the simple protocol (default_query_exec_mode is not among
	// its keys), so the statement is one statement: it cannot end the
	// transaction and go on.
	tx, err := c.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, postgresError(fn, err)
	}
	defer tx.Rollback()
	return body(ctx, tx, query, args)
}

package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/clip"
	"github.com/agentbe/agentbe-daemon/tools/registry"
)

// Bounds of what is logged of a call's arguments.
const (
	MaxString = 256     // longest string value kept whole
	MaxArgs   = 4 << 10 // longest redacted arguments object kept
	Redacted  = "[redacted]"
)

// DefaultQueue is the number of lines waiting for the writer before new
// ones are dropped.
const DefaultQueue = 4096

// Record is the one shape of everything the audit log records, one JSON
// line each: a tool call (ToolCall), an SSH exec, shell, SFTP or scp
// session, a connection --previews opened or refused, an operator's
// decision on a system.run request, the program a system.run started. The
// daemon's one audit sink turns each of its parts' events into a Record
// and hands it to Log.Write; the field names are the file's format
// (docs/tools.md, "Audit log").
type Record struct {
	Time       time.Time       `json:"time"`
	Face       string          `json:"face"` // mcp-http, mcp-stdio, rest, gateway, ssh
	Remote     string          `json:"remote,omitempty"`
	Scope      string          `json:"scope,omitempty"`
	Caller     string          `json:"caller,omitempty"`  // the token file entry, when one was used
	Session    string          `json:"session,omitempty"` // the client's session id (/gateway's sessionId), when it gave one
	Tool       string          `json:"tool"`              // a tool's name, or ssh.exec, ssh.shell, ssh.sftp
	Command    string          `json:"command,omitempty"`
	Outcome    string          `json:"outcome"`
	DurationMS float64         `json:"duration_ms"`
	BytesIn    int64           `json:"bytes_in"`
	BytesOut   int64           `json:"bytes_out"`
	Args       json.RawMessage `json:"args,omitempty"`
}

// Options configures a Log.
type Options struct {
	// Path is the file to append to, or "-" for stderr.
	Path string
	// Queue is how many lines may wait for the writer (0 = DefaultQueue).
	Queue int
	// Secrets are strings that must never appear in the log (the
	// daemon's tokens); each is replaced by "[redacted]" wherever it
	// occurs. The list is read at each write, so values a reload adds are
	// hidden from the next record on. nil: none.
	Secrets *clip.Secrets
	// Stderr is where "-" writes (nil = os.Stderr); for tests.
	Stderr io.Writer
	// Logger hears of failed writes (a full disk, a revoked file): the first
	// of a run at once, then at most one summary per WriteErrorEvery; nil
	// discards. The failures are counted either way (WriteErrors).
	Logger *slog.Logger
}

// WriteErrorEvery is how often failed writes are reported to Options.Logger
// while they go on.
const WriteErrorEvery = 10 * time.Second

// Log is an open audit log. It is safe for concurrent use.
type Log struct {
	opts Options
	// pairs are Options.Secrets' values, raw and JSON-escaped, for the
	// list they were made from (secretPairs).
	pairs atomic.Pointer[secretPairs]

	q       chan []byte
	stop    chan struct{}
	done    chan struct{}
	closed  atomic.Bool
	once    sync.Once
	dropped atomic.Uint64
	failed  atomic.Uint64 // lines whose write failed
	// dropReport is when drops were last reported to Options.Logger (Unix
	// nanoseconds, 0 before the first), and dropReported how many had
	// been dropped by then: Write reports the first drop of a run at once
	// and then at most once per WriteErrorEvery.
	dropReport   atomic.Int64
	dropReported atomic.Uint64

	// under mu: the write-failure report's rate limit
	failedReported uint64
	lastReport     time.Time

	mu sync.Mutex // guards w, f and cut
	w  io.Writer
	f  *os.File // nil for stderr
	// cut: the file ends in a line cut short (a write the full disk cut,
	// or a power cut before the last run's line was whole), so the next
	// line starts with a newline of its own.
	cut bool
}

// Open opens the log and starts its writer.
func Open(opts Options) (*Log, error) {
	if opts.Path == "" {
		return nil, fmt.Errorf("audit log: no path")
	}
	if opts.Queue <= 0 {
		opts.Queue = DefaultQueue
	}
	l := &Log{opts: opts, q: make(chan []byte, opts.Queue), stop: make(chan struct{}), done: make(chan struct{})}
	if err := l.open(0); err != nil {
		return nil, err
	}
	go l.writer()
	return l, nil
}

// Reopen opens the file again by its name (after logrotate renamed it);
// lines already written went to the old file. For "-" it does nothing.
// After Close it opens nothing (no file made again, no descriptor left
// open) and says so. It never waits: a FIFO under the name that no
// process reads now is an error at once (the previous file stays in use),
// not an open that waits for a reader and holds up every later reload
// (the daemon's SIGHUP steps run one after the other). Open, at start,
// waits for the FIFO's reader.
func (l *Log) Reopen() error { return l.open(syscall.O_NONBLOCK) }

// open opens the log by its name with the extra open(2) flags.
func (l *Log) open(flags int) error {
	if l.closed.Load() {
		return errClosed
	}
	if l.opts.Path == "-" {
		l.mu.Lock()
		l.w = l.opts.Stderr
		if l.w == nil {
			l.w = os.Stderr
		}
		l.mu.Unlock()
		return nil
	}
	f, err := os.OpenFile(l.opts.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|flags, 0o600)
	if errors.Is(err, syscall.ENXIO) && flags&syscall.O_NONBLOCK != 0 {
		return fmt.Errorf("audit log: %s is a FIFO that no process reads now: %w", l.opts.Path, err)
	}
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	cut := endsCut(l.opts.Path, f)
	l.mu.Lock()
	if l.closed.Load() { // Close ran meanwhile
		l.mu.Unlock()
		f.Close()
		return errClosed
	}
	old := l.f
	l.f, l.w, l.cut = f, f, cut
	l.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

// endsCut reports whether f, the log opened for appending as path, is a
// regular file whose last byte is not a newline: its last line was cut
// short. The last byte is read through a second descriptor, opened by the
// name and used only if it is the same file.
func endsCut(path string, f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return false
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer r.Close()
	if ri, err := r.Stat(); err != nil || !os.SameFile(fi, ri) {
		return false
	}
	var b [1]byte
	n, _ := r.ReadAt(b[:], fi.Size()-1)
	return n == 1 && b[0] != '\n'
}

// errClosed is Reopen's error after Close.
var errClosed = errors.New("audit log: closed")

// Dropped is how many lines were lost to a full queue.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// WriteErrors is how many lines were lost because writing them failed.
func (l *Log) WriteErrors() uint64 { return l.failed.Load() }

// Close writes the lines still queued and closes the file.
func (l *Log) Close() error {
	l.once.Do(func() {
		l.closed.Store(true)
		close(l.stop)
	})
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		err := l.f.Close()
		l.f = nil
		return err
	}
	return nil
}

// ToolCall is the Record of a finished tool call, its arguments redacted
// (Redact), the log's secrets among them: each string is rid of every
// secret before it is cut, so a cut that falls inside one leaves none of
// it behind.
func (l *Log) ToolCall(r registry.Record) Record {
	return Record{
		Time: r.Start, Face: r.Face, Remote: r.Remote, Scope: r.Scope, Caller: r.Caller, Session: r.Session, Tool: r.Tool,
		Outcome: r.Outcome, DurationMS: Millis(r.Duration), BytesIn: int64(r.BytesIn), BytesOut: int64(r.BytesOut),
		Args: redact(r.Args, l.hide),
	}
}

// hide replaces each secret in s by Redacted: before a string is cut, so
// that no prefix of a secret the cut falls inside stays in the line (the
// whole line is scrubbed again once marshalled, for what is not cut).
func (l *Log) hide(s string) string {
	for _, sec := range l.opts.Secrets.List() {
		if strings.Contains(s, sec) {
			s = strings.ReplaceAll(s, sec, Redacted)
		}
	}
	return s
}

// secretPairs are the values of one Secrets list, each raw and as JSON
// escapes it (what a marshalled line holds).
type secretPairs struct {
	from  []string
	pairs [][2][]byte
}

// secrets are the pairs of the list in force, made again only when a
// reload added to it.
func (l *Log) secrets() [][2][]byte {
	list := l.opts.Secrets.List()
	if len(list) == 0 {
		return nil
	}
	if p := l.pairs.Load(); p != nil && len(p.from) == len(list) && &p.from[0] == &list[0] {
		return p.pairs
	}
	p := &secretPairs{from: list}
	for _, s := range list {
		esc, _ := json.Marshal(s)
		p.pairs = append(p.pairs, [2][]byte{[]byte(s), esc[1 : len(esc)-1]})
	}
	l.pairs.Store(p)
	return p.pairs
}

// Millis is a duration as a Record's DurationMS: milliseconds, to the
// microsecond.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// MaxLine bounds one line of the log (before secrets are replaced): each
// of the 8 string fields is cut at MaxString bytes plus the note of its
// length, each byte at most 6 once JSON-escaped, and the arguments at
// MaxArgs. So the queue holds at most Options.Queue × MaxLine bytes (about
// 74 MiB at DefaultQueue), however long the names a client sends: a tool
// nobody serves is logged by the name it was called with, a scope by the
// X-Scope-Path that asked for it.
const MaxLine = 8*6*(MaxString+32) + MaxArgs + 1024

// Write queues one record, the log's one entry point; it never blocks. A full queue drops the line,
// counts it (Dropped) and reports it to Options.Logger, rate-limited.
func (l *Log) Write(e Record) {
	if l.closed.Load() {
		return
	}
	for _, f := range []*string{&e.Face, &e.Remote, &e.Scope, &e.Caller, &e.Session, &e.Tool, &e.Command, &e.Outcome} {
		*f = l.hide(*f)
		if len(*f) > MaxString {
			*f = cut(*f)
		}
	}
	if len(e.Args) > MaxArgs {
		e.Args = json.RawMessage(fmt.Sprintf(`{"bytes":%d,"truncated":true}`, len(e.Args)))
	}
	line, err := json.Marshal(e)
	if err != nil {
		return
	}
	line = l.scrub(line)
	line = append(line, '\n')
	select {
	case l.q <- line:
	default:
		l.drop()
	}
}

// drop counts a line lost to a full queue and tells the daemon's log: the
// first drop of a run at once, then at most one summary per
// WriteErrorEvery while drops go on.
func (l *Log) drop() {
	n := l.dropped.Add(1)
	if l.opts.Logger == nil {
		return
	}
	last, now := l.dropReport.Load(), time.Now().UnixNano()
	if last != 0 && now-last < int64(WriteErrorEvery) {
		return
	}
	if !l.dropReport.CompareAndSwap(last, now) {
		return // another goroutine reports this one
	}
	since := n - l.dropReported.Swap(n)
	l.opts.Logger.Warn("audit log: the queue is full (the writer is behind); lines are dropped (counted in agentbe_audit_dropped_total)",
		"path", l.opts.Path, "queue", cap(l.q), "dropped_since_last_report", since, "dropped_total", n)
}

func (l *Log) scrub(line []byte) []byte {
	for _, s := range l.secrets() {
		line = bytes.ReplaceAll(line, s[0], []byte(Redacted))
		line = bytes.ReplaceAll(line, s[1], []byte(Redacted))
	}
	return line
}

func (l *Log) writer() {
	defer close(l.done)
	var reported uint64
	write := func(line []byte) {
		if d := l.dropped.Load(); d != reported {
			note := fmt.Sprintf(`{"time":%q,"event":"audit.dropped","dropped":%d,"note":"the audit queue was full; %d line(s) were not logged"}`+"\n",
				time.Now().UTC().Format(time.RFC3339Nano), d-reported, d-reported)
			reported = d
			l.put([]byte(note))
		}
		l.put(line)
	}
	for {
		select {
		case line := <-l.q:
			write(line)
		case <-l.stop:
			for {
				select {
				case line := <-l.q:
					write(line)
				default:
					return
				}
			}
		}
	}
}

// put writes one line. A failure is counted and reported to the logger, the
// first of a run at once and then at most once per WriteErrorEvery, so a full
// disk shows in the daemon's log and in /metrics without flooding either.
// The writer keeps going: the next line may succeed (space freed, a SIGHUP
// reopened the file).
func (l *Log) put(line []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return
	}
	if l.cut {
		line = append([]byte{'\n'}, line...)
	}
	if n, err := l.w.Write(line); err != nil {
		if n > 0 && l.f != nil {
			l.cut = true // what fit is a line cut short
		}
		n := l.failed.Add(1)
		if l.opts.Logger != nil && (l.failedReported == 0 || time.Since(l.lastReport) >= WriteErrorEvery) {
			l.opts.Logger.Error("audit log: write failed; the line is lost (counted in agentbe_audit_write_errors_total)",
				"path", l.opts.Path, "err", err, "lost_since_last_report", n-l.failedReported, "lost_total", n)
			l.failedReported, l.lastReport = n, time.Now()
		}
		return
	}
	l.cut = false
}

// secretKey reports whether an argument's name says it holds a secret.
func secretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"token", "password", "passwd", "secret", "authorization", "api_key", "apikey"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

func cut(s string) string {
	return fmt.Sprintf("%s…[%d bytes]", strings.ToValidUTF8(s[:MaxString], ""), len(s))
}

// Redact returns the arguments as they are logged: "env" values and
// secret-named keys replaced by "[redacted]", "content" replaced by its
// length ({"bytes": n}), strings over MaxString bytes cut, and the whole
// replaced by {"bytes": n} if still over MaxArgs or not a JSON object.
// nil or "null" gives nil.
func Redact(args json.RawMessage) json.RawMessage { return redact(args, nil) }

// redact is Redact, each string passed through hide (when set) before it
// is cut.
func redact(args json.RawMessage, hide func(string) string) json.RawMessage {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || string(t) == "null" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(t, &m); err != nil {
		return json.RawMessage(fmt.Sprintf(`{"bytes":%d,"unparsed":true}`, len(args)))
	}
	for k, v := range m {
		switch {
		case k == "env":
			if env, ok := v.(map[string]any); ok {
				for ek := range env {
					env[ek] = Redacted
				}
			} else {
				m[k] = Redacted
			}
		case secretKey(k):
			m[k] = Redacted
		case k == "content":
			if s, ok := v.(string); ok {
				m[k] = map[string]int{"bytes": len(s)}
			} else {
				m[k] = Redacted
			}
		default:
			m[k] = bound(v, 0, hide)
		}
	}
	out, err := json.Marshal(m)
	if err != nil || len(out) > MaxArgs {
		return json.RawMessage(fmt.Sprintf(`{"bytes":%d,"truncated":true}`, len(args)))
	}
	return out
}

// bound cuts long strings, and redacts secret-named keys, at any depth;
// each string goes through hide (when set) before it is cut.
func bound(v any, depth int, hide func(string) string) any {
	if depth > 8 {
		return "[nested too deep]"
	}
	switch x := v.(type) {
	case string:
		if hide != nil {
			x = hide(x)
		}
		if len(x) > MaxString {
			return cut(x)
		}
		return x
	case []any:
		for i := range x {
			x[i] = bound(x[i], depth+1, hide)
		}
	case map[string]any:
		for k, e := range x {
			if secretKey(k) || k == "env" {
				x[k] = Redacted
			} else {
				x[k] = bound(e, depth+1, hide)
			}
		}
	}
	return v
}

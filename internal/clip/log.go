package clip

import (
	"context"
	"fmt"
	"log/slog"
)

// LogValue is how many bytes of one value a log line keeps: a request's
// path, an SSH user name, a command, an error that quotes them. A client
// decides how long these are (a path up to net/http's 1 MiB header, an SSH
// user name up to a 256 KiB packet, a command up to the body limit), and
// the text handler writes a byte that is not printable as four, the JSON
// handler invalid UTF-8 as six: without the cut one request would write
// megabytes of log. A panic's stack fits.
const LogValue = 16 << 10

// Handler returns h behind the cut: each string value of a record (its
// message, an attribute, a group's, an error's or a Stringer's text, an
// attribute added by Logger.With) longer than n bytes is cut by String
// before h sees it. Quoting is h's: slog's text and JSON handlers escape
// newlines, control characters, U+2028 and bytes that are not UTF-8, so a
// value cannot start a line of its own. A record with nothing to cut is
// passed on as it is. Handler(Handler(h, n), n) is Handler(h, n).
func Handler(h slog.Handler, n int) slog.Handler {
	if c, ok := h.(handler); ok && c.n <= n {
		return c
	}
	return handler{h: h, n: n}
}

type handler struct {
	h slog.Handler
	n int
}

func (c handler) Enabled(ctx context.Context, l slog.Level) bool { return c.h.Enabled(ctx, l) }

func (c handler) Handle(ctx context.Context, r slog.Record) error {
	long := len(r.Message) > c.n
	if !long {
		r.Attrs(func(a slog.Attr) bool {
			long = c.tooLong(a.Value)
			return !long
		})
	}
	if !long {
		return c.h.Handle(ctx, r)
	}
	cut := slog.NewRecord(r.Time, r.Level, String(r.Message, c.n), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		cut.AddAttrs(c.attr(a))
		return true
	})
	return c.h.Handle(ctx, cut)
}

func (c handler) WithAttrs(as []slog.Attr) slog.Handler {
	cut := make([]slog.Attr, len(as))
	for i, a := range as {
		cut[i] = c.attr(a)
	}
	return handler{h: c.h.WithAttrs(cut), n: c.n}
}

func (c handler) WithGroup(name string) slog.Handler {
	return handler{h: c.h.WithGroup(name), n: c.n}
}

// text is the text of a value the handlers write as a string, and whether
// it is one.
func text(v slog.Value) (string, bool) {
	switch v.Kind() {
	case slog.KindString:
		return v.String(), true
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			return x.Error(), true
		case fmt.Stringer:
			return x.String(), true
		case []byte:
			return string(x), true
		}
	}
	return "", false
}

func (c handler) tooLong(v slog.Value) bool {
	v = v.Resolve()
	if v.Kind() == slog.KindGroup {
		for _, a := range v.Group() {
			if c.tooLong(a.Value) {
				return true
			}
		}
		return false
	}
	s, ok := text(v)
	return ok && len(s) > c.n
}

func (c handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		g := v.Group()
		cut := make([]slog.Attr, len(g))
		for i, x := range g {
			cut[i] = c.attr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(cut...)}
	}
	if s, ok := text(v); ok && len(s) > c.n {
		return slog.String(a.Key, String(s, c.n))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

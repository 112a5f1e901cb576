package clip

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// LogValue is how many bytes of one value a log line keeps: a request's
// path, an SSH user name, a command, an error that quotes them. A client
// decides how long these are (a path up to net/http's 1 MiB header, an SSH
// user name up to a 256 KiB packet, a command up to the body limit), and
// the text handler writes a byte that is not printable as four, the JSON
// handler invalid UTF-8 as six: without the cut one request would write
// megabytes of log. A panic's stack fits.
const LogValue = 16 << 10

// Redacted is what a secret is replaced by in a log line.
const Redacted = "[redacted]"

// Handler returns h behind the cut: each string value of a record (its
// message, an attribute, a group's, an error's or a Stringer's text, an
// attribute added by Logger.With) has each of secrets (the daemon's
// tokens, read as the record is written, so a reload's new token is
// hidden from its first line) replaced by Redacted and is then, when
// longer than n bytes, cut by String before h sees it: replaced first, so
// a cut that falls inside a secret leaves no prefix of it. Quoting is h's:
// slog's text and JSON handlers escape newlines, control characters,
// U+2028 and bytes that are not UTF-8, so a value cannot start a line of
// its own. A record with nothing to change is passed on as it is.
// Wrapping a Handler again keeps one: the smaller n, the secrets of both.
// secrets may be nil.
func Handler(h slog.Handler, n int, secrets *Secrets) slog.Handler {
	var keep []*Secrets
	if c, ok := h.(handler); ok {
		h, n, keep = c.h, min(n, c.n), c.secrets
	}
	if secrets != nil && !slices.Contains(keep, secrets) {
		keep = append(slices.Clip(keep), secrets)
	}
	return handler{h: h, n: n, secrets: keep}
}

type handler struct {
	h       slog.Handler
	n       int
	secrets []*Secrets
}

// fix is s as the line holds it: its secrets replaced, then cut.
func (c handler) fix(s string) string {
	return String(c.hide(s), c.n)
}

func (c handler) hide(s string) string {
	for _, set := range c.secrets {
		for _, sec := range set.List() {
			if strings.Contains(s, sec) {
				s = strings.ReplaceAll(s, sec, Redacted)
			}
		}
	}
	return s
}

// changes reports whether fix changes s.
func (c handler) changes(s string) bool {
	if len(s) > c.n {
		return true
	}
	for _, set := range c.secrets {
		for _, sec := range set.List() {
			if strings.Contains(s, sec) {
				return true
			}
		}
	}
	return false
}

func (c handler) Enabled(ctx context.Context, l slog.Level) bool { return c.h.Enabled(ctx, l) }

func (c handler) Handle(ctx context.Context, r slog.Record) error {
	long := c.changes(r.Message)
	if !long {
		r.Attrs(func(a slog.Attr) bool {
			long = c.tooLong(a.Value)
			return !long
		})
	}
	if !long {
		return c.h.Handle(ctx, r)
	}
	cut := slog.NewRecord(r.Time, r.Level, c.fix(r.Message), r.PC)
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
	return handler{h: c.h.WithAttrs(cut), n: c.n, secrets: c.secrets}
}

func (c handler) WithGroup(name string) slog.Handler {
	return handler{h: c.h.WithGroup(name), n: c.n, secrets: c.secrets}
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
	return ok && c.changes(s)
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
	if s, ok := text(v); ok && c.changes(s) {
		return slog.String(a.Key, c.fix(s))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

package clip

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestHandlerCutsEveryStringValue: the message, a string attribute, an
// error's and a []byte's text, a group's values and an attribute added by
// With are each cut at n bytes; short values, numbers and the keys are
// kept; a record with nothing to cut is written as it is.
func TestHandlerCutsEveryStringValue(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewJSONHandler(&buf, nil), 8, nil))
	long := strings.Repeat("x", 100)
	log.With("with", long).WithGroup("g").Info(long, "s", long, "err", errors.New(long), "b", []byte(long), "n", 12345678901,
		slog.Group("inner", "s", long, "short", "ok"))
	got := buf.String()
	for _, want := range []string{`"msg":"xxxxxxxx…"`, `"with":"xxxxxxxx…"`, `"g":{"s":"xxxxxxxx…","err":"xxxxxxxx…","b":"xxxxxxxx…","n":12345678901,"inner":{"s":"xxxxxxxx…","short":"ok"}}`} {
		if !strings.Contains(got, want) {
			t.Errorf("line lacks %s: %s", want, got)
		}
	}
	if strings.Contains(got, "xxxxxxxxx") {
		t.Errorf("a value longer than 8 bytes: %s", got)
	}
	buf.Reset()
	log.Info("short", "s", "ok")
	if !strings.Contains(buf.String(), `"msg":"short"`) || !strings.Contains(buf.String(), `"s":"ok"`) {
		t.Errorf("short line: %s", buf.String())
	}
	a, b := NewSecrets("a"), NewSecrets("b")
	if h := Handler(Handler(Handler(slog.DiscardHandler, 8, a), 9, b), 10, a).(handler); h.h != slog.DiscardHandler || h.n != 8 || len(h.secrets) != 2 {
		t.Errorf("Handler thrice: %+v, want one wrapping, n 8, secrets a and b", h)
	}
}

// TestHandlerHidesSecrets: a secret in the message, an attribute, an
// error, a With attribute or a group is replaced by Redacted, before the
// cut, so a value that puts a secret across the cut keeps none of it.
func TestHandlerHidesSecrets(t *testing.T) {
	const sec = "S3CRET-tok"
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewTextHandler(&buf, nil), 20, NewSecrets(sec)))
	log.With("w", "x"+sec).Info("m "+sec, "s", sec, "err", errors.New("bad "+sec), slog.Group("g", "s", sec),
		"straddle", strings.Repeat("y", 15)+sec)
	got := buf.String()
	if strings.Contains(got, "S3CR") {
		t.Errorf("a secret or its prefix in %s", got)
	}
	if strings.Count(got, Redacted[:5]) != 6 {
		t.Errorf("want 6 redactions: %s", got)
	}
}

// BenchmarkHandler is the cut's cost on a request's log line (nothing to
// change: the common case), against the bare handler. Run:
//
//	go test -run '^$' -bench Handler -benchmem ./internal/clip/
func BenchmarkHandler(b *testing.B) {
	line := func(b *testing.B, log *slog.Logger) {
		b.ReportAllocs()
		for b.Loop() {
			log.LogAttrs(context.Background(), slog.LevelInfo, "http request", slog.String("method", "POST"), slog.String("path", "/mcp"),
				slog.Int("status", 200), slog.Int64("bytes", 512), slog.Duration("duration", 1500), slog.String("remote", "127.0.0.1:40000"))
		}
	}
	b.Run("bare", func(b *testing.B) { line(b, slog.New(slog.NewTextHandler(io.Discard, nil))) })
	b.Run("cut", func(b *testing.B) {
		line(b, slog.New(Handler(slog.NewTextHandler(io.Discard, nil), LogValue, NewSecrets("daemon-token-0123456789", "operator-token-0123456789"))))
	})
}

// FuzzHandler: whatever a client puts in a record's message, an attribute,
// an error or a group, the line written holds no secret, and no value
// longer than n bytes (the marker aside).
func FuzzHandler(f *testing.F) {
	const sec1, sec2 = "S3CRET-tok-0123456789", "op-token-abcdefghijk"
	f.Add("m "+sec1, "x"+sec2, strings.Repeat("y", 15)+sec1, uint8(20))
	f.Add(sec1[:10], sec1[10:], "é€😀", uint8(3))
	f.Add("S3CRET-tok-012345678S3CRET-tok-0123456789", "", "\xff", uint8(0))
	f.Fuzz(func(t *testing.T, msg, attr, errText string, n uint8) {
		var buf bytes.Buffer
		// JSON, so each value can be read back whole.
		log := slog.New(Handler(slog.NewJSONHandler(&buf, nil), int(n), NewSecrets(sec1, sec2)))
		log.With("w", attr).WithGroup("g").Info(msg, "s", attr, "err", errors.New(errText), slog.Group("in", "s", msg))
		var line map[string]any
		if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
			t.Fatalf("line %q: %v", buf.String(), err)
		}
		var check func(v any)
		check = func(v any) {
			switch v := v.(type) {
			case string:
				for _, sec := range []string{sec1, sec2} {
					if strings.Contains(v, sec) {
						t.Fatalf("value %q holds a secret", v)
					}
				}
				// In runes: the JSON handler writes a byte that is not
				// UTF-8 as U+FFFD.
				if utf8.RuneCountInString(strings.TrimSuffix(v, Marker)) > int(n) && v != "INFO" {
					t.Fatalf("value %q is over %d bytes", v, n)
				}
			case map[string]any:
				for k, x := range v {
					if k != "time" {
						check(x)
					}
				}
			}
		}
		check(line)
	})
}

// TestHandlerHidesSecretsAddedLater: a value added to the list after the
// logger was built (a reload's new token) is hidden from the next line,
// the old value stays hidden, and a value that holds another is replaced
// whole, so no tail of the longer one is left beside the marker.
func TestHandlerHidesSecretsAddedLater(t *testing.T) {
	var buf bytes.Buffer
	secrets := NewSecrets("old-token")
	log := slog.New(Handler(slog.NewTextHandler(&buf, nil), LogValue, secrets))
	log.Info("before", "v", "new-token")
	if !strings.Contains(buf.String(), "new-token") {
		t.Fatalf("a value not yet a secret was hidden: %s", buf.String())
	}
	buf.Reset()
	secrets.Add("new-token", "old-token-and-more")
	log.Info("after", "a", "new-token", "b", "old-token", "c", "old-token-and-more")
	got := buf.String()
	if strings.Contains(got, "token") {
		t.Errorf("a secret or a piece of one in %s", got)
	}
	if strings.Count(got, Redacted) != 3 {
		t.Errorf("want 3 redactions: %s", got)
	}
}

// TestSecretsBound: the list keeps at most MaxSecrets values, the newest,
// and serves them longest first.
func TestSecretsBound(t *testing.T) {
	s := NewSecrets("", "a")
	for i := range MaxSecrets + 5 {
		s.Add(strings.Repeat("x", i+2))
	}
	s.Add(strings.Repeat("x", 10)) // held already: not doubled
	got := s.List()
	if len(got) != MaxSecrets {
		t.Fatalf("%d values, want %d", len(got), MaxSecrets)
	}
	if got[0] != strings.Repeat("x", MaxSecrets+6) || got[len(got)-1] != strings.Repeat("x", 7) {
		t.Errorf("want the newest %d, longest first: first %q, last %q", MaxSecrets, got[0], got[len(got)-1])
	}
	if slices.Contains(got, "a") || slices.Contains(got, "") {
		t.Errorf("the oldest value or an empty one kept: %q", got)
	}
	var nilSecrets *Secrets
	if nilSecrets.List() != nil {
		t.Error("a nil list holds something")
	}
}

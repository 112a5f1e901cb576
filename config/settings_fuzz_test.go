package config

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzSettingRoundTrip: whatever value a flag, variable or config file
// gives a setting, one it takes is written by get (--check-config's
// output, the config-file form) in a form it takes again as the same value.
func FuzzSettingRoundTrip(f *testing.F) {
	for i, raw := range []string{"3001", "true", "10s", "1m30s", "4MiB", " 2 K ", "a, b,,c", "10.1.2.3/16", "80,443", "0", "-1", "1.5h", "debug", "", "9223372036854775807ns"} {
		f.Add(uint8(i*7), raw)
	}
	f.Fuzz(func(t *testing.T, which uint8, raw string) {
		s := settings[int(which)%len(settings)]
		c := Default()
		if s.set(&c, raw) != nil {
			return
		}
		out := s.get(&c)
		again := Default()
		if err := s.set(&again, out); err != nil {
			t.Fatalf("--%s %q taken, written as %q, which is refused: %v", s.key, raw, out, err)
		}
		if got, want := s.field(&again), s.field(&c); !reflect.DeepEqual(got, want) {
			t.Fatalf("--%s %q taken as %v, written as %q, read back as %v", s.key, raw, reflect.ValueOf(want).Elem(), out, reflect.ValueOf(got).Elem())
		}
		if back := s.get(&again); back != out {
			t.Fatalf("--%s %q: written %q, then %q", s.key, raw, out, back)
		}
	})
}

// FuzzSecondsForm: a number of seconds in DEFAULT_TIMEOUT becomes a
// duration that is that many seconds (to the nanosecond); anything else
// passes unchanged, for the setting's check to word.
func FuzzSecondsForm(f *testing.F) {
	for _, s := range []string{"30", "2.5", " 7 ", "30s", "1e3", "-1", "1e10", "NaN", "inf", "0x10", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := secondsForm(v)
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(n >= 0 && n <= 1e9) {
			if got != v {
				t.Fatalf("secondsForm(%q) = %q; want it unchanged", v, got)
			}
			return
		}
		d, err := time.ParseDuration(got)
		if err != nil || math.Abs(d.Seconds()-n) > 1e-9*math.Max(1, n) {
			t.Fatalf("secondsForm(%q) = %q (%v, %v); want %g seconds", v, got, d, err, n)
		}
	})
}

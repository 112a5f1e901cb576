package figures

import (
	"strings"
	"testing"
	"time"
)

func TestFigures(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if got := Ms(1500 * time.Microsecond); got != 1.5 {
		t.Errorf("Ms = %v", got)
	}
	for in, want := range map[float64]string{123.45: "123.5", 1.2345: "1.23", 0.12345: "0.123"} {
		if got := Num(in); got != want {
			t.Errorf("Num(%v) = %q, want %q", in, got, want)
		}
	}
	if f := strings.Fields(LoadAvg()); len(f) != 3 {
		t.Errorf("LoadAvg() = %q, want three fields", LoadAvg())
	}
}

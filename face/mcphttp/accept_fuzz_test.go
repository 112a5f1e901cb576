package mcphttp

import (
	"mime"
	"strings"
	"testing"
)

// FuzzAccepts: the reply formats an Accept header allows are those its
// media ranges name, each range's type read as mime.ParseMediaType reads
// it (parameters, q among them, aside), where it parses; anything only
// with */* or no range at all (empty elements ignored).
func FuzzAccepts(f *testing.F) {
	for _, s := range []string{"application/json, text/event-stream", "text/event-stream;q=0.9", "*/*", "Application/JSON ; charset=utf-8", "text/*", "application/*", "", "text/html", " , ,", "application/json;x=\"a,b\""} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		values := []string{a}
		if b != "" {
			values = append(values, b)
		}
		jsonOK, sseOK, anyOK := accepts(values)
		var wantJSON, wantSSE, wantAny bool
		parsed := true
		for _, v := range values {
			for _, part := range strings.Split(v, ",") {
				if strings.TrimSpace(part) == "" {
					continue
				}
				mt, _, err := mime.ParseMediaType(part)
				if err != nil {
					parsed = false
					continue
				}
				switch mt {
				case "application/json", "application/*":
					wantJSON = true
				case "text/event-stream", "text/*":
					wantSSE = true
				case "*/*":
					wantAny = true
				}
			}
		}
		// A quoted parameter holding a comma is split by accepts (as by
		// most servers); only lists whose every range parses are compared.
		if parsed && (jsonOK != wantJSON || sseOK != wantSSE) {
			t.Fatalf("Accept %q: json %v sse %v; the media types say json %v sse %v", values, jsonOK, sseOK, wantJSON, wantSSE)
		}
		// Anything: a */* range, or no range at all (an empty header).
		empty := true
		for _, v := range values {
			for _, part := range strings.Split(v, ",") {
				base, _, _ := strings.Cut(part, ";")
				empty = empty && strings.TrimSpace(base) == ""
			}
		}
		if parsed && anyOK != (empty || wantAny) {
			t.Fatalf("Accept %q: any format %v", values, anyOK)
		}
	})
}

package httpguard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestOriginAllowed(t *testing.T) {
	g := New(Options{AllowedOrigins: []string{"https://App.example/", "http://tool.example:8080"}})
	tests := []struct {
		origin string
		want   bool
	}{
		{"http://localhost:5173", true},
		{"https://LOCALHOST", true},
		{"http://127.0.0.1", true},
		{"http://127.1.2.3:9", true},
		{"http://[::1]:3001", true},
		{"https://app.example", true},
		{"http://tool.example:8080", true},
		{"http://tool.example", false},
		{"http://app.example", false},
		{"http://evil.example", false},
		{"http://localhost.evil.example", false},
		{"http://127.0.0.1.evil.example", false},
		{"file://localhost", false},
		{"null", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := g.OriginAllowed(tt.origin); got != tt.want {
			t.Errorf("OriginAllowed(%q) = %v, want %v", tt.origin, got, tt.want)
		}
	}
	if !New(Options{AllowedOrigins: []string{"*"}}).OriginAllowed("http://evil.example") {
		t.Error(`"*" does not allow any origin`)
	}
}

func TestCheckHost(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3001}
	public := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 3001}
	tests := []struct {
		name   string
		token  string
		local  net.Addr
		host   string
		origin string
		want   int // 0 = admitted
		title  string
	}{
		{"loopback name", "", loop, "127.0.0.1:3001", "", 0, ""},
		{"localhost", "", loop, "localhost:3001", "", 0, ""},
		{"ipv6 loopback", "", loop, "[::1]:3001", "", 0, ""},
		{"rebinding", "", loop, "evil.example:3001", "", http.StatusForbidden, "Forbidden host"},
		{"rebinding with its origin", "", loop, "evil.example:3001", "http://evil.example:3001", http.StatusForbidden, "Forbidden origin"},
		{"rebinding with a token", "tok", loop, "evil.example:3001", "", 0, ""},
		{"public address", "", public, "daemon.internal:3001", "", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := New(Options{AuthToken: tt.token})
			r := httptest.NewRequest(http.MethodPost, "/x", nil)
			r.Host = tt.host
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tt.local))
			ref := g.Check(r)
			switch {
			case tt.want == 0 && ref != nil:
				t.Fatalf("refused: %+v", ref)
			case tt.want != 0 && (ref == nil || ref.Status != tt.want || ref.Title != tt.title):
				t.Fatalf("got %+v, want %d %q", ref, tt.want, tt.title)
			}
			w := httptest.NewRecorder()
			g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })).ServeHTTP(w, r)
			if want := tt.want; (want == 0 && w.Code != http.StatusTeapot) || (want != 0 && w.Code != want) {
				t.Fatalf("Wrap answered %d", w.Code)
			}
		})
	}
}

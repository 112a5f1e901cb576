package daemon

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/internal/metrics"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// TestRequestLogLine holds the request's log line that instrument writes,
// in both formats: its message, level, fields and their order and types
// (method, path, status, bytes, duration, remote), at info for every route
// but /health and /metrics, which log at debug; and the request counter
// still counts each request by route and status.
func TestRequestLogLine(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/tools", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "hello")
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			reg := metrics.NewRegistry()
			m, err := newHTTPMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			var logs syncbuf.Buffer
			var h slog.Handler = slog.NewTextHandler(&logs, nil)
			if format == "json" {
				h = slog.NewJSONHandler(&logs, nil)
			}
			srv := httptest.NewServer(instrument(mux, slog.New(h), m))
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{}}
			defer client.CloseIdleConnections()
			var remote string
			for _, path := range []string{"/tools?x=1", "/health"} {
				resp, err := client.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 1 {
				t.Fatalf("%d lines at info, want 1 (/health at debug):\n%s", len(lines), logs.String())
			}
			line := lines[0]
			if format == "text" {
				re := regexp.MustCompile(`^time=\S+ level=INFO msg="http request" method=GET path=/tools status=201 bytes=5 duration=[0-9.]+(ns|µs|ms|s) remote=(127\.0\.0\.1:\d+)$`)
				mm := re.FindStringSubmatch(line)
				if mm == nil {
					t.Fatalf("log line %q does not match %s", line, re)
				}
				remote = mm[2]
			} else {
				var got map[string]any
				if err := json.Unmarshal([]byte(line), &got); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				keys := regexp.MustCompile(`"([a-z]+)":`).FindAllStringSubmatch(line, -1)
				var order []string
				for _, k := range keys {
					order = append(order, k[1])
				}
				if strings.Join(order, " ") != "time level msg method path status bytes duration remote" {
					t.Errorf("fields %v", order)
				}
				d, ok := got["duration"].(float64)
				if got["level"] != "INFO" || got["msg"] != "http request" || got["method"] != "GET" || got["path"] != "/tools" ||
					got["status"] != float64(201) || got["bytes"] != float64(5) || !ok || d <= 0 {
					t.Errorf("log line %s", line)
				}
				remote, _ = got["remote"].(string)
			}
			if !strings.HasPrefix(remote, "127.0.0.1:") {
				t.Errorf("remote %q, want the client's address", remote)
			}
			text := string(reg.AppendText(nil))
			for _, want := range []string{`agentbe_http_requests_total{code="201",route="/tools"} 1`, `agentbe_http_requests_total{code="200",route="/health"} 1`} {
				if !strings.Contains(text, want) {
					t.Errorf("metrics lack %s:\n%s", want, text)
				}
			}
		})
	}
}

// BenchmarkInstrument is instrument's own cost per request (its log line
// at info, to a text handler that discards, and its metrics) around a
// handler that answers at once, without a network. Run:
//
//	go test -run '^$' -bench Instrument -benchmem ./daemon/
func BenchmarkInstrument(b *testing.B) {
	m, err := newHTTPMetrics(metrics.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	h := instrument(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		slog.New(slog.NewTextHandler(io.Discard, nil)), m)
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.RemoteAddr = "127.0.0.1:40000"
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
}

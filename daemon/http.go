package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/agentbe/agentbe-daemon/internal/admit"
	"github.com/agentbe/agentbe-daemon/internal/metrics"
)

// Routes the daemon serves; anything else is labelled "other" in metrics so a
// scanner cannot blow up label cardinality.
const (
	routeHealth = "/health"
	// routeHealthServers is the execution service's per-server view.
	routeHealthServers = "/health/servers"
	routeMetrics       = "/metrics"
	routeMCP           = "/mcp"
	routeSSH           = "/ssh"
	routeTools         = "/tools"
	routeExecute       = "/execute"
	routeGateway       = "/gateway"
	// routeApprovals is the operator's view of system.run approvals.
	routeApprovals = "/approvals"
	// routeSite is the --site tool site's prefix.
	routeSite = "/site/"
	// routePreview is --previews' HTTP proxy: /preview/{port}/...
	routePreview = "/preview/"
	// routeOtherwise is every path no other route serves: a JSON 404.
	routeOtherwise = "/"
	routeOther     = "other"
)

func routeOf(path string) string {
	if strings.HasPrefix(path, routePreview) {
		return routePreview
	}
	if strings.HasPrefix(path, routeSite) {
		return routeSite
	}
	if strings.HasPrefix(path, routeApprovals) {
		return routeApprovals
	}
	switch path {
	case routeHealth, routeHealthServers, routeMetrics, routeMCP, routeSSH, routeTools, routeExecute, routeGateway:
		return path
	}
	return routeOther
}

// httpMetrics are the request counters and the latency histogram.
type httpMetrics struct {
	requests    *metrics.CounterVec
	latency     *metrics.HistogramVec
	inflight    *metrics.Gauge
	connRefused *metrics.CounterVec
}

func newHTTPMetrics(reg *metrics.Registry) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: metrics.NewCounterVec("agentbe_http_requests_total", "HTTP requests by route and status code.", "route", "code"),
		latency: metrics.NewHistogramVec("agentbe_http_request_duration_seconds",
			"Time to answer an HTTP request, by route (WebSocket upgrades excluded).",
			// From 100µs (a cached read over loopback) to 60s (a long exec).
			metrics.ExponentialBuckets(0.0001, 4, 10), "route"),
		inflight: metrics.NewGauge("agentbe_http_requests_in_flight", "HTTP requests being answered now (upgraded WebSockets excluded)."),
		connRefused: metrics.NewCounterVec("agentbe_http_connections_refused_total",
			"TCP connections closed at once because a connection cap was reached, by the flag of that cap.", "limit"),
	}
	for _, c := range []metrics.Collector{m.requests, m.latency, m.inflight, m.connRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// statusRecorder remembers the status code for logs and metrics. It keeps the
// optional interfaces handlers need: Flush for SSE replies, Hijack for the
// WebSocket upgrade (gorilla/websocket asserts http.Hijacker directly), and
// Unwrap for http.ResponseController.
type statusRecorder struct {
	http.ResponseWriter
	status   int
	bytes    int64
	hijacked bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := r.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("daemon: response writer cannot be hijacked")
	}
	c, rw, err := h.Hijack()
	if err == nil {
		r.hijacked = true
		if r.status == 0 {
			r.status = http.StatusSwitchingProtocols
		}
	}
	return c, rw, err
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// instrument wraps the mux with panic recovery, request logging and metrics.
// A panicking handler is logged with its stack and answered 500; the daemon
// keeps serving.
func instrument(next http.Handler, log *slog.Logger, m *httpMetrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		route := routeOf(r.URL.Path)
		rec := &statusRecorder{ResponseWriter: w}
		m.inflight.Inc()
		defer func() {
			m.inflight.Dec()
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.Error("handler panicked; request answered 500, daemon keeps serving",
					"method", r.Method, "route", route, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if rec.status == 0 && !rec.hijacked {
					admit.WriteJSONError(rec, http.StatusInternalServerError, "Internal Server Error", "the daemon hit an internal error; see its log")
				}
			}
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			elapsed := time.Since(start)
			m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
			if !rec.hijacked {
				m.latency.WithLabelValues(route).Observe(elapsed.Seconds())
			}
			level := slog.LevelInfo
			if route == routeHealth || route == routeMetrics {
				level = slog.LevelDebug
			}
			// LogAttrs, not Log: the same line without boxing each value
			// into an any and turning it back into an attribute, less CPU
			// on every request (docs/performance.md, "The routed upstream
			// call"). TestRequestLogLine holds the line.
			log.LogAttrs(r.Context(), level, "http request",
				slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", status),
				slog.Int64("bytes", rec.bytes), slog.Duration("duration", elapsed), slog.String("remote", r.RemoteAddr))
		}()
		next.ServeHTTP(rec, r)
	})
}

// onlyGET answers 405 to anything but GET and HEAD. (A method pattern such as
// "GET /health" would let the catch-all "/" answer 404 to a POST instead.)
func onlyGET(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			admit.WriteJSONError(w, http.StatusMethodNotAllowed, "Method Not Allowed", r.Method+" is not supported on "+r.URL.Path+"; use GET")
			return
		}
		h.ServeHTTP(w, r)
	})
}

package metrics

import (
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
)

// ContentType is the text exposition format 0.0.4's media type, as
// promhttp names it.
const ContentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

// Handler serves r's families in the text format, gzipped when the client
// accepts gzip, as promhttp.HandlerFor does. It registers
// promhttp_metric_handler_errors_total on r (as promhttp does with
// HandlerOpts.Registry): cause "encoding" counts replies whose writing
// failed; "gathering" stays 0, since reading the collectors cannot fail
// here. The text format is the one answer: promhttp would answer a client
// that asks for protobuf in protobuf, and Prometheus accepts the text
// format whatever it asks first.
func Handler(r *Registry) (http.Handler, error) {
	errs := NewCounterVec("promhttp_metric_handler_errors_total", "Total number of internal errors encountered by the promhttp metric handler.", "cause")
	encoding := errs.WithLabelValues("encoding")
	errs.WithLabelValues("gathering")
	if err := r.Register(errs); err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b := r.AppendText(nil)
		h := w.Header()
		h.Set("Content-Type", ContentType)
		h.Add("Vary", "Accept")
		h.Add("Vary", "Accept-Encoding")
		var err error
		if acceptsGzip(req.Header.Get("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			if _, err = zw.Write(b); err == nil {
				err = zw.Close()
			}
		} else {
			h.Set("Content-Length", strconv.Itoa(len(b)))
			_, err = w.Write(b)
		}
		if err != nil {
			encoding.Inc()
		}
	}), nil
}

// acceptsGzip reports whether an Accept-Encoding header accepts gzip, as
// RFC 9110 (12.5.3) reads it: gzip (or x-gzip) listed with a q-value above
// 0, or, gzip not listed, "*" with one; "q" in any case. An explicit
// "gzip;q=0" refuses it whatever "*" says, and an explicit "gzip" takes it
// whatever "*;q=0" says.
func acceptsGzip(header string) bool {
	gzipQ, anyQ := -1.0, -1.0 // -1: not listed
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "x-gzip" && coding != "*" {
			continue
		}
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			name, v, ok := strings.Cut(p, "=")
			if ok && strings.EqualFold(strings.TrimSpace(name), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		if coding == "*" {
			anyQ = max(anyQ, q)
		} else {
			gzipQ = max(gzipQ, q)
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return anyQ > 0
}

package sites

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"path"
	"strings"

	"github.com/agentbe/agentbe-daemon/internal/admit"
)

// Handler serves the site: GET /{path} reads a page (or any file), POST
// /{path} runs a command the page allows. Mount it at the site's root, or
// under a prefix with HandlerAt.
//
// rules is the server's admission (internal/admit), the one every server
// of a site passes, the daemon's /site/ and `site serve` alike: each
// request is first admitted (the Origin and Host rules, the token,
// X-Root-Dir, X-Scope-Path) with JSONOnly set, so a POST's body must be
// declared JSON (415); then any method but GET and HEAD needs a token that
// may run commands (admit.Caller.MayRun: 403 for a read-only one). The
// site bounds a body itself (64 KiB, 413), so rules.MaxBody is not
// applied. rules.Guard is required: Handler panics without it, so no
// server can serve a site without the Origin and Host rules.
func (s *Site) Handler(rules admit.Rules) http.Handler { return s.HandlerAt("", rules) }

// HandlerAt is Handler mounted under prefix (the daemon's "/site"): a
// request is admitted on the path it came with, so a refusal names that
// path, and then served with prefix stripped (http.StripPrefix).
func (s *Site) HandlerAt(prefix string, rules admit.Rules) http.Handler {
	if rules.Guard == nil {
		panic("sites: Handler needs the Origin and Host rules (admit.Rules.Guard)")
	}
	rules.JSONOnly, rules.MaxBody = true, 0
	serve := http.Handler(http.HandlerFunc(s.serve))
	if prefix != "" {
		serve = http.StripPrefix(prefix, serve)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ref := rules.Admit(r)
		// A POST runs one of the site's commands: a token without exec
		// (read-only ones included) may read its pages only, as its
		// run_command tool is refused over MCP.
		if ref == nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
			ref = caller.MayRun("the site's pages can be read with GET")
		}
		if ref != nil {
			ref.Write(w)
			return
		}
		if caller.MayRun("") != nil {
			// Its GET may not run the pages' component blocks either.
			r = r.WithContext(WithoutCommands(r.Context()))
		}
		if s.opts.CallerContext != nil {
			r = r.WithContext(s.opts.CallerContext(r.Context(), caller))
		}
		serve.ServeHTTP(w, r)
	})
}

// serve answers an admitted request.
func (s *Site) serve(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.serveGet(w, r)
	case http.MethodPost:
		s.servePost(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		writeAction(w, http.StatusMethodNotAllowed, ActionResponse{Stderr: "use GET to read a page and POST to run one of its tools", Returncode: 1})
	}
}

func (s *Site) serveGet(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/" && wantsHTML(r) {
		s.serveOverview(w, r)
		return
	}
	page, data, err := s.ReadPage(r.Context(), r.URL.Path)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			http.Error(w, e.Msg, e.Status)
			return
		}
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	ct := "text/markdown; charset=utf-8"
	if ext := path.Ext(page); ext != ".md" {
		if ct = mime.TypeByExtension(ext); ct == "" {
			ct = http.DetectContentType(data)
		}
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		return
	}
	w.Write(data)
}

func (s *Site) servePost(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout(): // the server's body deadline (admit.BodyDeadline)
		w.Header().Set("Connection", "close")
		writeAction(w, http.StatusRequestTimeout, ActionResponse{Stderr: "the request body did not arrive in time", Returncode: 1})
		return
	case err != nil:
		writeAction(w, http.StatusBadRequest, ActionResponse{Stderr: "reading the request: " + err.Error(), Returncode: 1})
		return
	}
	if len(body) > MaxRequestBytes {
		writeAction(w, http.StatusRequestEntityTooLarge, ActionResponse{Stderr: "the request body is over 64 KiB", Returncode: 1})
		return
	}
	var req ActionRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeAction(w, http.StatusBadRequest, ActionResponse{Stderr: `the body must be {"command": [...], "args"?: {...}, "env"?: {...}}: ` + err.Error(), Returncode: 1})
		return
	}
	req.Output = outputMode(r.Header)
	switch req.Output {
	case OutputStrict:
		w.Header().Set("Preference-Applied", "handling=strict")
	case OutputCut:
		w.Header().Set("Preference-Applied", "handling=lenient")
	}
	res, err := s.Run(r.Context(), r.URL.Path, req)
	var te *TimeoutError
	var e *Error
	switch {
	case err == nil:
		writeAction(w, http.StatusOK, res)
	case errors.As(err, &te):
		res := te.Response
		res.Stderr += te.Error() + "\n"
		writeAction(w, http.StatusRequestTimeout, res)
	case errors.As(err, &e):
		writeAction(w, e.Status, ActionResponse{Stderr: e.Msg, Returncode: 1})
	default:
		writeAction(w, http.StatusInternalServerError, ActionResponse{Stderr: "internal error", Returncode: 1})
	}
}

// outputMode reads the handling preference of RFC 7240 from the request's
// Prefer headers: "handling=strict" asks for a 413 when the output is over
// the cap (statespace's answer), "handling=lenient" for the cut output with
// a notice; neither leaves it to the server (Options.StrictOutput). Other
// preferences are ignored, as RFC 7240 asks; the last handling wins.
func outputMode(h http.Header) OutputMode {
	mode := OutputDefault
	for _, line := range h.Values("Prefer") {
		for pref := range strings.SplitSeq(line, ",") {
			pref, _, _ = strings.Cut(pref, ";") // parameters of a preference
			name, value, _ := strings.Cut(pref, "=")
			if !strings.EqualFold(strings.TrimSpace(name), "handling") {
				continue
			}
			switch strings.ToLower(strings.Trim(strings.TrimSpace(value), `"`)) {
			case "strict":
				mode = OutputStrict
			case "lenient":
				mode = OutputCut
			}
		}
	}
	return mode
}

func writeAction(w http.ResponseWriter, status int, res ActionResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(marshal(res))
}

package gateway

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/agentbe/agentbe-daemon/internal/admit"
)

// ApprovalsHandler serves the operator's side of approvals on the REST
// face: GET /approvals lists the pending requests; POST /approvals/{id}
// with {"approved": bool, "always"?: bool} decides one. Both need the
// operator's token (Authorization: Bearer), which is not the agent's: an
// agent cannot approve its own commands. isOperator says whether a request
// carries it (the daemon's admission, internal/admit Rules.IsOperator;
// false when there is no operator's token). decided is told of every
// decision (the audit log).
func (a *Approvals) ApprovalsHandler(isOperator func(*http.Request) bool, decided func(p Pending, approved, always bool, remote string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON := func(status int, v any) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(v)
		}
		writeError := func(status int, title, msg string) {
			w.Header().Set("Cache-Control", "no-store")
			admit.WriteJSONError(w, status, title, msg)
		}
		if !isOperator(r) {
			writeError(http.StatusUnauthorized, "Unauthorized", "approvals need the operator's token (--operator-token-file), not the agent's")
			return
		}
		id := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/approvals"), "/")
		switch {
		case r.Method == http.MethodGet && id == "":
			writeJSON(http.StatusOK, map[string]any{"pending": a.List()})
		case r.Method == http.MethodPost && id != "":
			var body struct {
				Approved *bool `json:"approved"`
				Always   bool  `json:"always"`
			}
			dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil || body.Approved == nil {
				writeError(http.StatusBadRequest, "Bad Request", `the body is {"approved": true|false, "always"?: true|false}`)
				return
			}
			p, err := a.Decide(id, *body.Approved, body.Always)
			switch {
			case errors.Is(err, ErrNoRequest):
				writeError(http.StatusNotFound, "Not Found", err.Error())
			case err != nil:
				writeError(http.StatusInternalServerError, "Internal Server Error", err.Error())
			default:
				if decided != nil {
					// p.Always: an "always" for a program the agent
					// can change was taken as once (p.Note says why).
					decided(p, *body.Approved, p.Always, r.RemoteAddr)
				}
				writeJSON(http.StatusOK, p)
			}
		default:
			w.Header().Set("Allow", "GET, POST")
			writeError(http.StatusMethodNotAllowed, "Method Not Allowed", "GET /approvals, or POST /approvals/{requestId}")
		}
	})
}

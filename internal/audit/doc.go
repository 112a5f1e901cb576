// Package audit writes the audit log: one JSON line per Record, the one
// shape of every event it records (a tool call, an SSH session, a
// forwarded connection, an approval, a program system.run started), handed
// to Log.Write, its one entry point, by the daemon's one audit sink
// (daemon/audit.go); to a file opened 0600 for appending (reopened by
// Reopen, on SIGHUP, for logrotate) or to stderr.
//
// Lines are queued to one writer goroutine through a bounded queue, so a
// slow disk never holds a tool call up: when the queue is full the line is
// dropped, counted (Dropped, exported as a metric by the daemon), reported
// to Options.Logger (rate-limited), and the next line written is preceded
// by one "audit.dropped" line saying how many were lost. Every string of a
// line is cut at MaxString bytes, so a line stays under MaxLine and the
// queue under Options.Queue lines of it.
//
// What is logged of a call's arguments is bounded and has its secrets
// removed (see Redact): values of "env" become "[redacted]" (keys kept),
// keys that name a secret are redacted, "content" is logged as its length,
// other strings longer than MaxString bytes are cut, and arguments whose
// redacted form is still over MaxArgs bytes are logged as their size only.
// Every secret handed to Options.Secrets (the auth token) is replaced
// wherever it appears in a line, arguments and SSH commands included, in
// each string before it is cut (Log.ToolCall, Log.Write), so a cut inside
// a secret leaves no prefix of it.
package audit

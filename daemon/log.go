package daemon

import (
	"io"
	"log/slog"

	"github.com/agentbe/agentbe-daemon/internal/clip"
)

// NewLogger returns the daemon's logger writing to w (stderr in production:
// stdout is reserved for MCP in --local-only mode). format is "text" or
// "json"; level is debug, info, warn or error (validated by config). Each
// value of a line is cut at clip.LogValue bytes (clip.Handler), and New
// cuts a logger it is given the same way.
func NewLogger(w io.Writer, format, level string) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(clip.Handler(slog.NewJSONHandler(w, opts), clip.LogValue, nil))
	}
	return slog.New(clip.Handler(slog.NewTextHandler(w, opts), clip.LogValue, nil))
}

// clipped is log behind clip.Handler: what a client decides the length of
// (a path, an SSH user name, a command) takes at most clip.LogValue bytes
// of a line, and secrets (the daemon's and the operator's tokens, which a
// command or a name may carry) are replaced, whichever part of the daemon
// logs it.
func clipped(log *slog.Logger, secrets *clip.Secrets) *slog.Logger {
	return slog.New(clip.Handler(log.Handler(), clip.LogValue, secrets))
}

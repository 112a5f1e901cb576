package daemon

import (
	"io"
	"log/slog"
)

// NewLogger returns the daemon's logger writing to w (stderr in production:
// stdout is reserved for MCP in --local-only mode). format is "text" or
// "json"; level is debug, info, warn or error (validated by config).
func NewLogger(w io.Writer, format, level string) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

package client

import (
	"context"
	"log/slog"
	"time"
)

// OpLogger receives one Entry per logged operation ("Operations Logging").
// LogOp is called on the operation's goroutine after it ends; it must be safe
// for concurrent use and should not block.
type OpLogger interface {
	LogOp(Entry)
}

// LogMode says which operations a backend hands to its OpLogger.
type LogMode int

const (
	// LogStandard logs the operations that change something: exec, write,
	// mkdir, rm, rename, touch.
	LogStandard LogMode = iota
	// LogVerbose logs every operation, reads included.
	LogVerbose
)

// Entry is one logged operation.
type Entry struct {
	Time      time.Time // when it started
	Op        string    // "exec", "read", "write", "mkdir", ...
	Path      string    // the path as given (rename: the old path)
	NewPath   string    // rename's new path
	Command   string    // exec's command
	Workspace string    // the backend's RootDir
	Success   bool
	Duration  time.Duration
	Stdout    []byte // exec only (bounded by the backend's output limit)
	Stderr    []byte // exec only, on failure
	Err       error
}

// modifying reports whether op is logged in LogStandard mode.
func modifying(op string) bool {
	switch op {
	case "exec", "write", "mkdir", "rm", "rename", "touch":
		return true
	}
	return false
}

// SlogLogger returns an OpLogger writing each entry to l at Info (Warn when
// it failed).
func SlogLogger(l *slog.Logger) OpLogger { return slogLogger{l: l} }

type slogLogger struct{ l *slog.Logger }

func (s slogLogger) LogOp(e Entry) {
	attrs := []slog.Attr{
		slog.String("op", e.Op),
		slog.Bool("success", e.Success),
		slog.Duration("duration", e.Duration),
		slog.String("workspace", e.Workspace),
	}
	if e.Path != "" {
		attrs = append(attrs, slog.String("path", e.Path))
	}
	if e.NewPath != "" {
		attrs = append(attrs, slog.String("new_path", e.NewPath))
	}
	if e.Command != "" {
		attrs = append(attrs, slog.String("command", e.Command))
	}
	if len(e.Stdout) > 0 {
		attrs = append(attrs, slog.String("stdout", string(e.Stdout)))
	}
	if len(e.Stderr) > 0 {
		attrs = append(attrs, slog.String("stderr", string(e.Stderr)))
	}
	level := slog.LevelInfo
	if e.Err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	s.l.LogAttrs(context.Background(), level, "agentbe operation", attrs...)
}

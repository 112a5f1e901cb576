package fsops

import (
	"path"
	"strconv"
	"strings"

	"github.com/agentbe/agentbe-daemon/errcode"
)

// ResolvePath applies the path rules of docs/protocol.md to the client path p
// for a workspace rooted at root (an absolute, clean, slash-separated path) and
// returns the absolute path p names. It is purely lexical: it never touches the
// file system, so it is cheap and deterministic; the directory workspace adds
// symlink confinement on top (through os.Root) when the path is used.
//
// The rules, in order:
//   - "", "." and "/" name the root;
//   - an absolute path equal to root or below it (after cleaning) is used as is;
//   - any other absolute path is made relative by stripping its leading slashes
//     ("/etc/passwd" is root/etc/passwd), and the prefix test is on whole path
//     components, so "/var/workspace2" is not inside "/var/workspace";
//   - a relative path is joined to root; ".." is fine while the result stays
//     inside root and is a PATH_ESCAPE_ATTEMPT (naming p) once it would leave.
//
// The path it returns is at most MaxPathBytes long; a longer one is an
// INVALID_ARGUMENT, "file name too long".
//
// Every protocol uses this one function (MCP tools, SFTP, the sandbox's cwd
// check), so the rules have a single source of truth.
func ResolvePath(root, p string) (string, error) {
	if p == "" || p == "." || p == "/" {
		return root, nil
	}
	if isCleanRel(p) {
		if len(root)+1+len(p) > MaxPathBytes {
			return "", tooLong("resolve", p)
		}
		if root == "/" {
			return "/" + p, nil
		}
		return root + "/" + p, nil
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errcode.New(errcode.InvalidArgument, "resolve", p, "path contains a NUL byte")
	}
	orig := p
	if p[0] == '/' {
		c := path.Clean(p)
		if within(root, c) {
			if len(c) > MaxPathBytes {
				return "", tooLong("resolve", orig)
			}
			return c, nil
		}
		// Other absolute paths are relative to the root (leading slashes stripped).
		p = strings.TrimLeft(p, "/")
	}
	var joined string
	if root == "/" {
		joined = path.Clean("/" + p)
	} else {
		joined = path.Clean(root + "/" + p)
	}
	if !within(root, joined) {
		return "", escapeError("resolve", orig)
	}
	if len(joined) > MaxPathBytes {
		return "", tooLong("resolve", orig)
	}
	return joined, nil
}

// MaxPathBytes bounds a resolved path, the workspace root's own path
// included: the system's PATH_MAX less its NUL, the longest path a program
// in the workspace can open by name. The daemon itself opens one component
// at a time and could go further, but a client could then make a tree of
// any depth with one call (a 100 KiB X-Scope-Path and a write_file made
// 50,000 directories) that nothing else could open by name.
const MaxPathBytes = 4095

// tooLong is the error of a path past MaxPathBytes.
func tooLong(op, p string) *errcode.Error {
	return &errcode.Error{
		Code: errcode.InvalidArgument,
		Op:   op,
		Path: shownPath(p),
		Msg:  "file name too long",
		Hint: "a path, with the workspace root's own path before it, is at most " + strconv.Itoa(MaxPathBytes) + " bytes (the system's PATH_MAX)",
	}
}

// shownPath is a path as an error names it: past 200 bytes, its first 200
// and an ellipsis, so that a refused path of megabytes is not sent back
// whole.
func shownPath(p string) string {
	if len(p) <= 200 {
		return p
	}
	return strings.ToValidUTF8(p[:200], "") + "…"
}

// isCleanRel reports whether p is a relative path that cleaning would not
// change and that has no "." or ".." element (the common case, resolved
// without allocating).
func isCleanRel(p string) bool {
	if p == "" || p[0] == '/' || p[len(p)-1] == '/' {
		return false
	}
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			if p[i] == 0 {
				return false
			}
			continue
		}
		switch p[start:i] {
		case "", ".", "..":
			return false
		}
		start = i + 1
	}
	return true
}

// within reports whether the clean absolute path c is root or below it, with
// the prefix matched on a "/" boundary.
func within(root, c string) bool {
	if c == root {
		return true
	}
	if root == "/" {
		return strings.HasPrefix(c, "/")
	}
	return len(c) > len(root) && c[len(root)] == '/' && c[:len(root)] == root
}

// relTo returns the clean absolute path abs relative to root ("." for the root
// itself). abs must be within root.
func relTo(root, abs string) string {
	if abs == root {
		return "."
	}
	if root == "/" {
		return abs[1:]
	}
	return abs[len(root)+1:]
}

// resolveRel is ResolvePath expressed relative to root, the form os.Root and
// the memory store take. The escape error names the caller's path p.
func resolveRel(root, p string) (string, error) {
	if p == "" || p == "." || p == "/" {
		return ".", nil
	}
	if isCleanRel(p) {
		if len(root)+1+len(p) > MaxPathBytes {
			return "", tooLong("resolve", p)
		}
		return p, nil
	}
	abs, err := ResolvePath(root, p)
	if err != nil {
		if e, ok := err.(*errcode.Error); ok {
			// The same failure, naming the caller's path: a new error
			// wrapping the one ResolvePath returned, which is not changed.
			return "", &errcode.Error{Code: e.Code, Op: e.Op, Path: shownPath(p), Msg: e.Msg, Hint: e.Hint, Err: e}
		}
		return "", err
	}
	return relTo(root, abs), nil
}

// escapeError is the error every confinement failure returns.
func escapeError(op, p string) *errcode.Error {
	return &errcode.Error{
		Code: errcode.PathEscapeAttempt,
		Op:   op,
		Path: shownPath(p),
		Msg:  "path escapes the workspace",
		Hint: "paths, and symlinks on the way, must stay inside the workspace root",
	}
}

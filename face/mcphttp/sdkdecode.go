package mcphttp

import (
	"bytes"
	"strings"

	"github.com/agentbe/agentbe-daemon/internal/jsonscan"
)

// This file: the one rule both fast paths (fastpath.go over HTTP,
// stdio_fast.go over stdio) apply before answering a message outside the
// SDK: the SDK must read the message as encoding/json read it, or the
// message is the SDK's to answer.

// sdkDecodesAlike reports whether the SDK decodes msg (one JSON-RPC
// message that json.Unmarshal decoded, for either fast path) as
// json.Unmarshal did. The SDK's decoder matches keys exactly where
// json.Unmarshal ignores case (an "ID" is no id to the SDK, a "Name" no
// tool name), and refuses a message nested more than 1000 levels deep; such
// a message is the SDK's to answer (TestFastPathLeavesToSDKWhatItReadsOtherwise,
// TestStdioFastPathLeavesToSDKWhatItReadsOtherwise).
func sdkDecodesAlike(msg []byte) bool {
	if tooDeep(msg, 1000) {
		return false
	}
	obj := bytes.TrimLeft(msg, " \t\r\n")
	params, ok := exactKeys(obj, "jsonrpc", "id", "method", "params")
	if !ok {
		return false
	}
	_, ok = exactKeys(params, "name", "arguments", "_meta", "cursor")
	return ok
}

// tooDeep reports whether b nests objects and arrays more than max levels
// deep, counted as the SDK counts them (internal/json's checkMaxDepth).
func tooDeep(b []byte, max int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > max {
				return true
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return false
}

// exactKeys reports whether no key of the JSON object obj matches one of
// names without case while differing from it, and returns the value of the
// last key "params" (what json.Unmarshal decodes there). A value that is
// not an object has no keys.
func exactKeys(obj []byte, names ...string) (params []byte, ok bool) {
	exact := true
	ok = jsonscan.Keys(obj, func(key string, val []byte) bool {
		for _, n := range names {
			if strings.EqualFold(key, n) && key != n {
				exact = false
				return false
			}
		}
		if key == "params" {
			params = val
		}
		return true
	})
	if !ok || !exact {
		return nil, false
	}
	return params, true
}

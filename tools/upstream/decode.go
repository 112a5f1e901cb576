package upstream

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeMessage is jsonrpc.DecodeMessage, with a path of its own for the
// message an upstream sends most: an answer with a result,
// {"jsonrpc":"2.0","id":N,"result":{...}}. The SDK's decoder (go-sdk's
// internal/json over segmentio/encoding) allocates a 32 KiB buffer for
// every message it decodes, whatever the message's size: for a small
// answer that was a third of all the bytes the daemon allocated per routed
// call (docs/performance.md, "The routed upstream call"). Anything else,
// and any answer this path is not sure to read as the SDK does, goes to
// jsonrpc.DecodeMessage, so the result and the errors are the SDK's own
// (TestDecodeMatchesSDK, FuzzDecodeMatchesSDK).
func decodeMessage(line []byte) (jsonrpc.Message, error) {
	if m, ok := decodeResult(line); ok {
		return m, nil
	}
	return jsonrpc.DecodeMessage(line)
}

// maxDepth is the go-sdk's nesting limit on a message (internal/json's
// defaultMaxDepth): a deeper one is refused, by the SDK.
const maxDepth = 1000

// decodeResult reads line as an answer with a result when it is exactly
// one JSON object whose keys are "jsonrpc" ("2.0"), "id" (a string of
// printable ASCII without escapes, or an integer of up to 15 digits) and
// "result" (an object), each once, written without escapes, with nothing
// after it; the result is valid JSON and UTF-8 and nests no deeper than
// the SDK allows. ok is false for anything else.
func decodeResult(line []byte) (_ *jsonrpc.Response, ok bool) {
	s := scanner{b: line}
	s.space()
	if !s.eat('{') {
		return nil, false
	}
	var version, haveID bool
	var id jsonrpc.ID
	var result []byte
	depth := 1 // the message's own object
	for {
		s.space()
		key, ok := s.plainString()
		if !ok {
			return nil, false
		}
		s.space()
		if !s.eat(':') {
			return nil, false
		}
		s.space()
		switch string(key) {
		case "jsonrpc":
			v, ok := s.plainString()
			if version || !ok || string(v) != "2.0" {
				return nil, false
			}
			version = true
		case "id":
			if haveID {
				return nil, false
			}
			if id, ok = s.id(); !ok {
				return nil, false
			}
			haveID = true
		case "result":
			if result != nil || s.peek() != '{' {
				return nil, false
			}
			start := s.i
			d, ok := s.skipValue()
			if !ok {
				return nil, false
			}
			result, depth = line[start:s.i], 1+d
		default:
			return nil, false
		}
		s.space()
		if s.eat(',') {
			continue
		}
		if s.eat('}') {
			break
		}
		return nil, false
	}
	s.space()
	if s.i != len(line) || !version || !haveID || result == nil || depth > maxDepth || !utf8.Valid(result) || !json.Valid(result) {
		return nil, false
	}
	return &jsonrpc.Response{ID: id, Result: append(json.RawMessage(nil), result...)}, true
}

// scanner walks a message's top level.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) eat(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// plainString reads a string of printable ASCII without escapes and
// returns what is between its quotes.
func (s *scanner) plainString() ([]byte, bool) {
	if !s.eat('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c < 0x20 || c > 0x7e || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// id reads an id the SDK reads alike: a plain string, or an integer that
// a float64 holds exactly (the SDK decodes numbers as float64).
func (s *scanner) id() (jsonrpc.ID, bool) {
	if s.peek() == '"' {
		v, ok := s.plainString()
		if !ok {
			return jsonrpc.ID{}, false
		}
		id, err := jsonrpc.MakeID(string(v))
		return id, err == nil
	}
	start := s.i
	s.eat('-')
	digits := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	n := s.i - digits
	if n == 0 || n > 15 || (n > 1 && s.b[digits] == '0') {
		return jsonrpc.ID{}, false
	}
	if c := s.peek(); c == '.' || c == 'e' || c == 'E' {
		return jsonrpc.ID{}, false
	}
	v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil || (v == 0 && s.b[start] == '-') {
		return jsonrpc.ID{}, false // "-0" is a float64 the SDK makes 0 of; not worth a path
	}
	id, err := jsonrpc.MakeID(float64(v)) // exact: 15 digits
	return id, err == nil
}

// skipValue moves past one object or array (its syntax is checked later,
// by json.Valid) and returns how deep it nests.
func (s *scanner) skipValue() (depth int, ok bool) {
	d := 0
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case '"':
			s.i++
			for ; s.i < len(s.b) && s.b[s.i] != '"'; s.i++ {
				if s.b[s.i] == '\\' {
					s.i++
				}
			}
			if s.i >= len(s.b) {
				return 0, false
			}
		case '{', '[':
			d++
			depth = max(depth, d)
		case '}', ']':
			d--
			if d < 0 {
				return 0, false
			}
		}
		s.i++
		if d == 0 {
			return depth, true
		}
	}
	return 0, false
}

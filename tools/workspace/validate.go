package workspace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Tool arguments are validated here, against the same schema maps the tools
// advertise, rather than by the SDK, for two reasons:
//
//   - The message. An LLM reads it to fix its next call, so it is a plain
//     sentence in the reference's frame ("Input validation error: Invalid
//     arguments for tool read_text_file: offset must be greater than 0, got
//     0") instead of a JSON Schema validator's trace.
//   - The cost. The SDK decodes the arguments twice more per call (schema
//     validation and unmarshalling) with a decoder that allocates a 32 KiB
//     buffer each time; here it is one small decode with encoding/json.
//
// The validator knows the subset of JSON Schema our tools use: object
// (properties, required, additionalProperties), string, boolean, integer
// (minimum, exclusiveMinimum), array (items, minItems) and enum. Unknown
// arguments are ignored, as the reference (zod) ignores them.

// validateArgs checks raw against an object schema and returns a sentence
// naming the first problem, or "".
//
// The arguments are checked as JSON, not decoded into generic maps: each
// value's type is its first byte, and only objects and arrays are split
// (into raw values); a value is decoded only to name it in a message
// (describe) or to compare it (enum, integer bounds). The handler decodes
// the arguments into its own struct afterwards, so a generic decode here
// would build every string (a whole file for write_file) a second time.
// TestValidateMatchesGeneric holds the messages to the generic decode's.
func validateArgs(raw json.RawMessage, s schema) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	if raw[0] == '{' && s["type"] == "object" && s["enum"] == nil {
		// The common case, in one pass: json.Unmarshal checks the whole
		// text before it splits the object, so every value is valid JSON.
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) == nil {
			return checkObject("arguments", m, s)
		}
	}
	// Not an object, or not JSON: as json.Decoder reads it (its error
	// names what is wrong and where; it takes the first value of a stream
	// and ignores what follows).
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return "arguments are not valid JSON: " + err.Error()
	}
	return check("arguments", v, s)
}

// check checks one valid JSON value against s.
func check(name string, raw []byte, s schema) string {
	if enum, ok := s["enum"].([]string); ok {
		var str string
		if raw[0] != '"' || json.Unmarshal(raw, &str) != nil || !slices.Contains(enum, str) {
			return fmt.Sprintf("%s must be one of %s, got %s", name, strings.Join(enum, ", "), describeRaw(raw))
		}
		return ""
	}
	switch s["type"] {
	case "object":
		var m map[string]json.RawMessage
		if raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
			return fmt.Sprintf("%s must be an object, got %s", name, describeRaw(raw))
		}
		return checkObject(name, m, s)
	case "array":
		var a []json.RawMessage
		if raw[0] != '[' || json.Unmarshal(raw, &a) != nil {
			return fmt.Sprintf("%s must be an array, got %s", name, describeRaw(raw))
		}
		if n, ok := s["minItems"].(int); ok && len(a) < n {
			return fmt.Sprintf("%s must have at least %d item(s), got %d", name, n, len(a))
		}
		if is, ok := s["items"].(schema); ok {
			for i, e := range a {
				if msg := check(fmt.Sprintf("%s[%d]", name, i), e, is); msg != "" {
					return msg
				}
			}
		}
	case "string":
		if raw[0] != '"' {
			return fmt.Sprintf("%s must be a string, got %s", name, describeRaw(raw))
		}
	case "boolean":
		if string(raw) != "true" && string(raw) != "false" {
			return fmt.Sprintf("%s must be a boolean, got %s", name, describeRaw(raw))
		}
	case "integer":
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return fmt.Sprintf("%s must be an integer, got %s", name, describeRaw(raw))
		}
		n := json.Number(raw)
		i, err := n.Int64()
		if err != nil {
			return fmt.Sprintf("%s must be an integer, got %s", name, n)
		}
		if min, ok := s["exclusiveMinimum"].(int); ok && i <= int64(min) {
			return fmt.Sprintf("%s must be greater than %d, got %d", name, min, i)
		}
		if min, ok := s["minimum"].(int); ok && i < int64(min) {
			return fmt.Sprintf("%s must be at least %d, got %d", name, min, i)
		}
		if i > 1<<31-1 {
			return fmt.Sprintf("%s is too large: %d", name, i)
		}
	}
	return ""
}

// checkObject checks an object's members (valid JSON values) against s,
// an object schema.
func checkObject(name string, m map[string]json.RawMessage, s schema) string {
	if req, ok := s["required"].([]string); ok {
		for _, r := range req {
			if _, ok := m[r]; !ok {
				return fmt.Sprintf("missing required argument %q", join(name, r))
			}
		}
	}
	props, _ := s["properties"].(schema)
	extra, _ := s["additionalProperties"].(schema)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys) // report the same problem first every time
	for _, k := range keys {
		ps, ok := props[k].(schema)
		if !ok {
			ps = extra
		}
		if ps == nil {
			continue
		}
		if msg := check(join(name, k), m[k], ps); msg != "" {
			return msg
		}
	}
	return ""
}

// describeRaw is describe of the value raw holds.
func describeRaw(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	dec.Decode(&v)
	return describe(v)
}

// join names a nested argument: "edits[0].oldText"; top-level names stand
// alone.
func join(parent, k string) string {
	if parent == "arguments" {
		return k
	}
	return parent + "." + k
}

// describe shows a JSON value's type and, for scalars, the value.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("string %q", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case json.Number:
		return "number " + v.String()
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

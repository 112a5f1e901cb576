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
func validateArgs(raw json.RawMessage, s schema) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "arguments are not valid JSON: " + err.Error()
	}
	return check("arguments", v, s)
}

func check(name string, v any, s schema) string {
	if enum, ok := s["enum"].([]string); ok {
		str, isStr := v.(string)
		if !isStr || !slices.Contains(enum, str) {
			return fmt.Sprintf("%s must be one of %s, got %s", name, strings.Join(enum, ", "), describe(v))
		}
		return ""
	}
	switch s["type"] {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s must be an object, got %s", name, describe(v))
		}
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
	case "array":
		a, ok := v.([]any)
		if !ok {
			return fmt.Sprintf("%s must be an array, got %s", name, describe(v))
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
		if _, ok := v.(string); !ok {
			return fmt.Sprintf("%s must be a string, got %s", name, describe(v))
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Sprintf("%s must be a boolean, got %s", name, describe(v))
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok {
			return fmt.Sprintf("%s must be an integer, got %s", name, describe(v))
		}
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

package workspace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// validateGeneric is validateArgs by a generic decode (map[string]any),
// the definition validateArgs is held to: same verdict, same sentence.
func validateGeneric(raw json.RawMessage, s schema) string {
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
	return checkGeneric("arguments", v, s)
}

func checkGeneric(name string, v any, s schema) string {
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
		sort.Strings(keys)
		for _, k := range keys {
			ps, ok := props[k].(schema)
			if !ok {
				ps = extra
			}
			if ps == nil {
				continue
			}
			if msg := checkGeneric(join(name, k), m[k], ps); msg != "" {
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
				if msg := checkGeneric(fmt.Sprintf("%s[%d]", name, i), e, is); msg != "" {
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

// validateSchemas are the input schemas of every workspace tool.
func validateSchemas(t testing.TB) map[string]schema {
	ws := fsops.NewMemory("/srv/ws", fsops.Options{})
	out := map[string]schema{}
	for _, tl := range Tools(ws, ExecEnv{}) {
		out[tl.Name] = tl.InputSchema.(schema)
	}
	return out
}

// validateInputs: arguments of every shape validateArgs tells apart, good
// and bad, for each kind of schema the tools use.
var validateInputs = []string{
	``, `null`, `{}`, ` { } `, `[]`, `5`, `"x"`, `true`, `{`, `{"a":}`, `{"path":"a"} trailing`, `{"path":"a"}{"path":"b"}`,
	`{"path":"a.txt"}`, `{"path":5}`, `{"path":null}`, `{"path":["a"]}`, `{"path":{"x":1}}`, `{"path":true}`,
	`{"path":"a","offset":0}`, `{"path":"a","offset":1}`, `{"path":"a","offset":-1}`, `{"path":"a","offset":1.5}`,
	`{"path":"a","offset":1e3}`, `{"path":"a","offset":"3"}`, `{"path":"a","limit":99999999999}`, `{"path":"a","head":2,"tail":3}`,
	`{"paths":[]}`, `{"paths":["a","b"]}`, `{"paths":["a",2]}`, `{"paths":"a"}`,
	`{"path":"a","edits":[{"oldText":"x","newText":"y"}]}`, `{"path":"a","edits":[{"oldText":"x"}]}`,
	`{"path":"a","edits":[{"oldText":1,"newText":"y"}]}`, `{"path":"a","edits":[5]}`, `{"path":"a","edits":[]}`,
	`{"path":"a","dryRun":"yes"}`, `{"path":"a","dryRun":false}`, `{"path":"a","sortBy":"size"}`, `{"path":"a","sortBy":"name"}`,
	`{"path":"a","sortBy":"nope"}`, `{"path":"a","sortBy":3}`, `{"path":"a","pattern":"*.go","sortBy":"mtime"}`,
	`{"path":"a","excludePatterns":["x",null]}`, `{"path":"a","includeDefaultExcludes":null}`,
	`{"command":"true"}`, `{"command":"true","timeout":0}`, `{"command":"true","env":{"A":"b"}}`, `{"command":"true","env":{"A":1}}`,
	`{"command":"true","env":[]}`, `{"command":"true","cwd":"/x"}`, `{"pa\u0074h":"a"}`, `{"path":"a","path":5}`, `{"path":5,"path":"a"}`,
	`{"content":"` + strings.Repeat(`x\n\"`, 1000) + `","path":"big"}`,
}

// TestValidateMatchesGeneric: validateArgs gives the generic decode's
// verdict and sentence for every input against every tool's schema.
func TestValidateMatchesGeneric(t *testing.T) {
	for name, s := range validateSchemas(t) {
		for _, in := range validateInputs {
			if got, want := validateArgs(json.RawMessage(in), s), validateGeneric(json.RawMessage(in), s); got != want {
				t.Errorf("%s %.80s:\n got %q\nwant %q", name, in, got, want)
			}
		}
	}
}

func FuzzValidate(f *testing.F) {
	for _, in := range validateInputs {
		f.Add(in)
	}
	schemas := validateSchemas(f)
	names := make([]string, 0, len(schemas))
	for n := range schemas {
		names = append(names, n)
	}
	sort.Strings(names)
	f.Fuzz(func(t *testing.T, in string) {
		for _, n := range names {
			if got, want := validateArgs(json.RawMessage(in), schemas[n]), validateGeneric(json.RawMessage(in), schemas[n]); got != want {
				t.Fatalf("%s %q:\n got %q\nwant %q", n, in, got, want)
			}
		}
	})
}

// BenchmarkValidate: validateArgs next to the generic decode it replaced
// (validateGeneric), for read_text_file's arguments and for write_file
// with 1 MiB of content. Run:
//
//	go test -run '^$' -bench Validate -benchmem ./tools/workspace/
func BenchmarkValidate(b *testing.B) {
	schemas := validateSchemas(b)
	big, _ := json.Marshal(map[string]string{"path": "big.txt", "content": strings.Repeat("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n", 16384)})
	for _, c := range []struct {
		name, tool string
		args       []byte
	}{
		{"read_text_file", "read_text_file", []byte(`{"path":"bench.txt","offset":10,"limit":100}`)},
		{"write_file-1MiB", "write_file", big},
	} {
		for _, v := range []struct {
			name string
			f    func(json.RawMessage, schema) string
		}{{"raw", validateArgs}, {"generic", validateGeneric}} {
			b.Run(c.name+"/"+v.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(c.args)))
				for b.Loop() {
					if msg := v.f(c.args, schemas[c.tool]); msg != "" {
						b.Fatal(msg)
					}
				}
			})
		}
	}
}

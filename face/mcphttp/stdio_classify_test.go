package mcphttp

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// classifyUnmarshal is what classify does, by decoding the whole line: the
// reference TestClassifyMatchesUnmarshal and FuzzClassify hold it to.
func classifyUnmarshal(line []byte) []message {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if line[0] == '[' {
		var batch []message
		if json.Unmarshal(line, &batch) == nil && len(batch) > 0 {
			return batch
		}
		return nil
	}
	var m message
	if json.Unmarshal(line, &m) == nil && line[0] == '{' {
		return []message{m}
	}
	return nil // not an object (a top-level null changes nothing either way)
}

func classified(line []byte, valid bool) []message {
	var got []message
	classify(line, valid, func(m message) { got = append(got, m) })
	return got
}

var classifyCases = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":"}\"]"}}}`,
	`{"jsonrpc":"2.0","id":"a\"b","result":{"content":[{"type":"text","text":"x\\\\"}]}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`,
	`{"ID":7,"METHOD":"ping"}`,
	`{"\u0069d":7,"me\u0074hod":"p\u0069ng"}`,
	`{"id":1,"id":2,"method":"a","method":null}`,
	`{"id":1,"method":5}`,
	`{"id":[1,{"a":[]}],"method":"m"}`,
	`  { "id" : -1.5e3 , "method" : "m" }  `,
	`[{"id":1,"method":"a"},{"id":2,"result":{}},null]`,
	`[{"id":1,"method":"a"},7]`,
	`[]`, `[ ]`, `{}`, `null`, `7`, `"x"`, ``, `{"id":1`, `{"id":1,"method":"a"}x`, `[{"id":1}`,
	`{"id":true,"method":"m","x":false,"y":null}`,
}

// TestClassifyMatchesUnmarshal: the scanner reads every line as decoding
// the whole line into a message would, requests and replies alike.
func TestClassifyMatchesUnmarshal(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"` + strings.Repeat(`ab\"\\\n`, 100000) + `"}]}}`
	for _, c := range append(classifyCases, big) {
		want := classifyUnmarshal([]byte(c))
		if got := classified([]byte(c), false); !reflect.DeepEqual(got, want) {
			t.Errorf("classify(%.80q) = %+v, json.Unmarshal gives %+v", c, got, want)
		}
		if json.Valid([]byte(c)) {
			if got := classified([]byte(c), true); !reflect.DeepEqual(got, want) {
				t.Errorf("classify(%.80q, valid) = %+v, json.Unmarshal gives %+v", c, got, want)
			}
		}
	}
}

func FuzzClassify(f *testing.F) {
	for _, c := range classifyCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		want := classifyUnmarshal(line)
		if got := classified(line, false); !reflect.DeepEqual(got, want) {
			t.Fatalf("classify(%q) = %+v, json.Unmarshal gives %+v", line, got, want)
		}
		if json.Valid(line) {
			if got := classified(line, true); !reflect.DeepEqual(got, want) {
				t.Fatalf("classify(%q, valid) = %+v, json.Unmarshal gives %+v", line, got, want)
			}
		}
	})
}

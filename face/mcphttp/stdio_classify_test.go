package mcphttp

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// classifyUnmarshal is what classify does, by decoding the whole line as
// the SDK's decoder does (keys matched exactly, unlike json.Unmarshal into
// a struct): the reference TestClassifyMatchesUnmarshal and FuzzClassify
// hold it to.
func classifyUnmarshal(line []byte) []message {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || !json.Valid(line) {
		return nil
	}
	if line[0] == '[' {
		var raws []json.RawMessage
		if json.Unmarshal(line, &raws) != nil || len(raws) == 0 {
			return nil
		}
		var batch []message
		for _, r := range raws {
			m, ok := decodeExact(r)
			if !ok {
				return nil
			}
			batch = append(batch, m)
		}
		return batch
	}
	if line[0] != '{' {
		return nil // not an object (a top-level null changes nothing either way)
	}
	if m, ok := decodeExact(line); ok {
		return []message{m}
	}
	return nil
}

// decodeExact decodes one message (an object, or null) with exact keys: the
// last of a repeated key wins, a null method leaves it as it was, a method
// of another type fails.
func decodeExact(raw []byte) (message, bool) {
	var m message
	if string(raw) == "null" {
		return m, true
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return m, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return m, false
		}
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return m, false
		}
		switch tok.(string) {
		case "id":
			m.ID = v
		case "params":
			m.Params = v
		case "method":
			switch {
			case v[0] == '"':
				json.Unmarshal(v, &m.Method)
			case string(v) != "null":
				return m, false
			}
		}
	}
	return m, true
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
	`{"Id":7,"method":"ping","id":8,"Method":"x","PARAMS":1,"params":{"requestId":8}}`,
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
// the whole line with exact keys would, requests and replies alike.
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

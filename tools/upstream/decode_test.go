package upstream

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeCases are lines an upstream may send: the answers the fast path
// takes, and near misses it must leave to the SDK.
var decodeCases = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}`,
	`{"jsonrpc":"2.0","id":"abc","result":{}}`,
	` {"id":42 , "result" : { "a" : [1, 2, {"b": "c\"}"}] } ,"jsonrpc":"2.0"} `,
	`{"jsonrpc":"2.0","id":-7,"result":{"t":"\u00e9\ud83d\ude00 é"}}`,
	`{"jsonrpc":"2.0","id":123456789012345,"result":{}}`,
	`{"jsonrpc":"2.0","id":1234567890123456,"result":{}}`,
	`{"jsonrpc":"2.0","id":9007199254740993,"result":{}}`,
	`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
	`{"jsonrpc":"2.0","id":1e2,"result":{}}`,
	`{"jsonrpc":"2.0","id":-0,"result":{}}`,
	`{"jsonrpc":"2.0","id":01,"result":{}}`,
	`{"jsonrpc":"2.0","id":null,"result":{}}`,
	`{"jsonrpc":"2.0","id":"a\"b","result":{}}`,
	`{"jsonrpc":"2.0","id":"é","result":{}}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`{"id":1,"result":{}}`,
	`{"jsonrpc":"1.0","id":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":null}`,
	`{"jsonrpc":"2.0","id":1,"result":[1]}`,
	`{"jsonrpc":"2.0","id":1,"result":"x"}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"result":{"a":1}}`,
	`{"jsonrpc":"2.0","ID":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"Result":{}}`,
	`{"jsonrpc":"2.0","i\u0064":1,"result":{}}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"extra":true}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"both"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
	`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{}} trailing`,
	`{"jsonrpc":"2.0","id":1,"result":{}}{}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":01}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":"` + "\x01" + `"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":"` + "\xff" + `"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":"\x"}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":1,}}`,
	`{"jsonrpc":"2.0","id":1,"result":{`,
	`{"jsonrpc":"2.0","id":1,"result":{}`,
	`{"jsonrpc":"2.0","id":1,"result":{}}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":[}]}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":tru}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":1e}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":-}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":.5}}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":"\ud800"}}`,
	`{"jsonrpc":"2.0" "id":1,"result":{}}`,
	`{"jsonrpc":"2.0",,"id":1,"result":{}}`,
	`{}`,
	`[]`,
	``,
	`null`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":\"\u2028\"}}",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\v",
	"\u00a0{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}",
	`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat(`{"a":`, 998) + `1` + strings.Repeat(`}`, 998) + `}`,
	`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat(`{"a":`, 999) + `1` + strings.Repeat(`}`, 999) + `}`,
	`{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat(`{"a":`, 1000) + `1` + strings.Repeat(`}`, 1000) + `}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":"` + strings.Repeat(`{`, 2000) + `"}}`,
}

// sameDecode says how decodeMessage and jsonrpc.DecodeMessage differ on
// line, "" when they do not: the same message, or the same error.
func sameDecode(line []byte) string {
	got, gerr := decodeMessage(line)
	want, werr := jsonrpc.DecodeMessage(line)
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		return fmt.Sprintf("error %v, the SDK's %v", gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("decoded %#v, the SDK %#v", got, want)
	}
	return ""
}

// TestDecodeMatchesSDK: every line decodes as the SDK decodes it, and the
// answers with a result that the fast path is for take it.
func TestDecodeMatchesSDK(t *testing.T) {
	for _, c := range decodeCases {
		if diff := sameDecode([]byte(c)); diff != "" {
			t.Errorf("%.120q: %s", c, diff)
		}
	}
	for _, c := range decodeCases[:5] {
		if _, ok := decodeResult([]byte(c)); !ok {
			t.Errorf("%q: not taken by the fast path", c)
		}
	}
}

// FuzzDecodeMatchesSDK: on any line, decodeMessage gives what
// jsonrpc.DecodeMessage gives.
func FuzzDecodeMatchesSDK(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if diff := sameDecode(line); diff != "" {
			t.Errorf("%q: %s", line, diff)
		}
	})
}

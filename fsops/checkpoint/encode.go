package checkpoint

import (
	"encoding/json"
	"strconv"

	"github.com/agentbe/agentbe-daemon/internal/jsonstr"
)

// encodeManifest is json.Marshal(m), written by hand for the entries: a
// checkpoint of a large workspace encodes one entry per file, and the
// reflection of encoding/json costs about as much as the whole walk. The
// output is the same JSON (TestEncodeManifestIsJSON), read back with
// json.Unmarshal.
func encodeManifest(m *Manifest) ([]byte, error) {
	head := *m
	head.Entries = nil
	hb, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	// hb ends in `"entries":null}` (or `…null,"skipped":{…}}`): replace the
	// null with the entries.
	const null = `"entries":null`
	at := -1
	for i := 0; i+len(null) <= len(hb); i++ {
		if string(hb[i:i+len(null)]) == null {
			at = i
			break
		}
	}
	if at < 0 {
		return json.Marshal(m)
	}
	b := make([]byte, 0, len(hb)+len(m.Entries)*120)
	b = append(b, hb[:at]...)
	b = append(b, `"entries":[`...)
	for i, e := range m.Entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"p":`...)
		b = jsonstr.Append(b, e.Path)
		b = append(b, `,"t":`...)
		b = jsonstr.Append(b, e.Type)
		b = append(b, `,"m":`...)
		b = strconv.AppendUint(b, uint64(e.Mode), 10)
		if e.Size != 0 {
			b = append(b, `,"s":`...)
			b = strconv.AppendInt(b, e.Size, 10)
		}
		if e.MTime != 0 {
			b = append(b, `,"mt":`...)
			b = strconv.AppendInt(b, e.MTime, 10)
		}
		if e.CTime != 0 {
			b = append(b, `,"ct":`...)
			b = strconv.AppendInt(b, e.CTime, 10)
		}
		if e.Dev != 0 {
			b = append(b, `,"d":`...)
			b = strconv.AppendUint(b, e.Dev, 10)
		}
		if e.Ino != 0 {
			b = append(b, `,"i":`...)
			b = strconv.AppendUint(b, e.Ino, 10)
		}
		if e.Hash != "" {
			b = append(b, `,"h":`...)
			b = jsonstr.Append(b, e.Hash)
		}
		if e.Target != "" {
			b = append(b, `,"l":`...)
			b = jsonstr.Append(b, e.Target)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	b = append(b, hb[at+len(null):]...)
	return b, nil
}

package sftpd

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/agentbe/agentbe-daemon/fsops"
)

// recorder is a session's byte stream: its requests all there at once, its
// answers kept with the size of each write.
type recorder struct {
	in     io.Reader
	out    bytes.Buffer
	writes []int
}

func (r *recorder) Read(b []byte) (int, error) { return r.in.Read(b) }
func (r *recorder) Write(b []byte) (int, error) {
	r.writes = append(r.writes, len(b))
	return r.out.Write(b)
}

// TestAnswersCoalesced: a client that sends its requests without waiting
// (the whole script, then 40 READs of 32 KiB in flight) gets the answers
// it gets one request at a time, byte for byte and in order, in fewer
// writes, none over sftpFlushAt plus one answer. (TestSFTPMatchesPkgSFTP
// sends one request and waits for its answer each time, over a pipe that
// buffers nothing: answers wait only while the next request is already
// there.)
func TestAnswersCoalesced(t *testing.T) {
	script := sftpScript()
	nread := 40
	open := len(script)
	script = append(script, sftpPacket(fxpOpen, uint32(9000), "/big", fxfRead, 0))
	one := func(ws fsops.Workspace, reqs [][]byte) [][]byte {
		return oneByOne(t, pipeServer(t, ourSFTP(ws)), reqs)
	}
	// Find the handle the OPEN of /big gets after the script.
	ws := sftpTestWorkspace(t)
	first := one(ws, script[:open+1])
	h := first[open]
	if h[4] != fxpHandle {
		t.Fatalf("OPEN /big answered %q", h)
	}
	handle := string(h[13:])
	for i := range nread {
		script = append(script, sftpPacket(fxpRead, uint32(9001+i), handle, uint64(i*997), 32768))
	}
	want := one(sftpTestWorkspace(t), script)

	rec := &recorder{in: bytes.NewReader(bytes.Join(script, nil))}
	if err := newSFTPServer(sftpTestWorkspace(t), rec).Serve(); !errors.Is(err, io.EOF) {
		t.Fatalf("Serve: %v, want io.EOF at the end of the requests", err)
	}
	for i := range script {
		g, err := readSFTPPacket(&rec.out)
		if err != nil {
			t.Fatalf("answer %d of %d: %v", i, len(script), err)
		}
		w := want[i]
		if w[4] == fxpExtendedReply && g[4] == fxpExtendedReply && len(w) == len(g) {
			continue // statvfs: the free counts may move between the runs
		}
		if !bytes.Equal(w, g) {
			t.Errorf("request %d (type %d): pipelined answer differs\none at a time: %q\npipelined:    %q", i, script[i][4], w, g)
		}
	}
	if rec.out.Len() != 0 {
		t.Errorf("%d bytes after the last answer", rec.out.Len())
	}
	if len(rec.writes) >= len(script)/4 {
		t.Errorf("%d answers in %d writes: not coalesced", len(script), len(rec.writes))
	}
	for i, n := range rec.writes {
		if n > sftpFlushAt+dataHeaderLen+sftpMaxRead {
			t.Errorf("write %d: %d bytes, over sftpFlushAt and one READ's answer (%d)", i, n, sftpFlushAt+dataHeaderLen+sftpMaxRead)
		}
	}
}

// TestAnswersBeforeMalformed: the answers waiting when a malformed request
// ends the session are sent first.
func TestAnswersBeforeMalformed(t *testing.T) {
	reqs := [][]byte{sftpPacket(fxpInit, 3), sftpPacket(fxpStat, uint32(1), "/a.txt"), {0, 0, 0, 0}}
	rec := &recorder{in: bytes.NewReader(bytes.Join(reqs, nil))}
	if err := newSFTPServer(sftpTestWorkspace(t), rec).Serve(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Serve: %v, want ErrMalformed", err)
	}
	for _, typ := range []byte{fxpVersion, fxpAttrs} {
		a, err := readSFTPPacket(&rec.out)
		if err != nil || a[4] != typ {
			t.Fatalf("answer %q, %v: want type %d", a, err, typ)
		}
	}
}

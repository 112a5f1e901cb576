//go:build linux

package sandbox

import (
	"bytes"
	"testing"
)

func TestHeadTail(t *testing.T) {
	tests := []struct {
		limit  int64
		chunks []string
		want   string
	}{
		{10, []string{"abc"}, "abc"},
		{10, []string{"0123456789"}, "0123456789"},
		{10, []string{"0123456789AB"}, "01234789AB"},
		{10, []string{"01", "23", "45", "67", "89", "AB", "CD"}, "0123489ABCD"[:5] + "89ABCD"[1:]},
		{10, []string{"0123", "456789ABCDEFGHIJ", "K"}, "01234GHIJK"},
		{1, []string{"abc"}, "c"},
		{3, []string{"a", "b", "c", "d", "e"}, "ade"},
	}
	for _, tc := range tests {
		h := newHeadTail(tc.limit)
		var total int64
		for _, c := range tc.chunks {
			n, err := h.Write([]byte(c))
			if err != nil || n != len(c) {
				t.Fatalf("Write = %d, %v", n, err)
			}
			total += int64(n)
		}
		got, size := h.bytes()
		if !bytes.Equal(got, []byte(tc.want)) || size != total {
			t.Errorf("limit %d chunks %q: got %q (%d), want %q (%d)", tc.limit, tc.chunks, got, size, tc.want, total)
		}
	}
}

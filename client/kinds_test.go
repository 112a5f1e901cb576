package client

import (
	"testing"
)

func TestLocalContract(t *testing.T) {
	for _, iso := range []string{"bwrap", "software", "none"} {
		t.Run(iso, func(t *testing.T) {
			runContract(t, func(t *testing.T) Backend {
				l, err := NewLocal(LocalOptions{Root: t.TempDir(), Isolation: iso})
				if err != nil {
					t.Fatal(err)
				}
				return l
			}, true)
		})
	}
}

func TestMemoryContract(t *testing.T) {
	runContract(t, func(t *testing.T) Backend {
		m, err := NewMemory(MemoryOptions{RootPrefix: "/mem", Data: map[string][]byte{"seed.txt": []byte("seed")}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}, false)
}

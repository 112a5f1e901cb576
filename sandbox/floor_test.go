//go:build linux

package sandbox

import (
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/agentbe/agentbe-daemon/errcode"
	"github.com/agentbe/agentbe-daemon/internal/syncbuf"
)

// TestIsolationFloor: Config.MinMode (--isolation-min) is the weakest
// mode New accepts. A configured mode below it is refused before anything
// is probed; an auto that resolves below it is refused with the mode it
// got, why the stronger ones failed, and the flag to change, and leaves
// no temporary directory behind; at or above it, auto's fallback is
// logged at warn. The floor's values are the effective modes, strongest
// first.
func TestIsolationFloor(t *testing.T) {
	if got, want := FloorModes(), []Mode{ModeBwrap, ModeLandlock, ModeSoftware, ModeNone}; !slices.Equal(got, want) {
		t.Fatalf("FloorModes() = %v, want %v", got, want)
	}
	for _, c := range []struct {
		m, floor Mode
		below    bool
	}{
		{ModeSoftware, ModeLandlock, true}, {ModeNone, ModeSoftware, true}, {ModeLandlock, ModeBwrap, true},
		{ModeLandlock, ModeLandlock, false}, {ModeBwrap, ModeNone, false}, {ModeNone, "", false},
		{ModeAuto, ModeBwrap, false}, // known only once probed
	} {
		if got := c.m.Below(c.floor); got != c.below {
			t.Errorf("%s.Below(%q) = %v, want %v", c.m, c.floor, got, c.below)
		}
	}

	refused := func(cfg Config, want ...string) {
		t.Helper()
		e, err := New(cfg)
		if err == nil {
			e.Close()
			t.Fatalf("New(%s, floor %s) succeeded in %s mode", cfg.Mode, cfg.MinMode, e.Mode())
		}
		if !errcode.Is(err, errcode.InvalidConfiguration) {
			t.Errorf("New(%s, floor %s): %v is not an invalid configuration", cfg.Mode, cfg.MinMode, err)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("New(%s, floor %s): %q does not say %q", cfg.Mode, cfg.MinMode, err, w)
			}
		}
	}
	refused(Config{Mode: ModeSoftware, MinMode: ModeLandlock, WorkspaceRoot: workspace(t)},
		"--isolation software is below --isolation-min landlock", "lower --isolation-min")
	refused(Config{Mode: ModeNone, MinMode: "docker", WorkspaceRoot: workspace(t)}, `invalid --isolation-min "docker"`)
	refused(Config{Mode: ModeNone, MinMode: ModeAuto, WorkspaceRoot: workspace(t)}, `invalid --isolation-min "auto"`)

	e, _ := newExec(t, ModeSoftware, func(c *Config) { c.MinMode = ModeSoftware })
	if e.Mode() != ModeSoftware {
		t.Fatalf("software at its own floor: %s", e.Mode())
	}

	// No bwrap: auto can give landlock at best.
	t.Setenv("PATH", t.TempDir())
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if LandlockABI() >= 1 {
		refused(Config{MinMode: ModeBwrap, WorkspaceRoot: workspace(t)},
			"commands would run in landlock mode, below --isolation-min bwrap", "bwrap is not installed", "make bwrap work here, or lower --isolation-min")
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("the refused executor left %v in TMPDIR", left)
		}
		var logs syncbuf.Buffer
		e, err := New(Config{MinMode: ModeLandlock, WorkspaceRoot: workspace(t), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatalf("auto with floor landlock, without bwrap: %v", err)
		}
		e.Close()
		if l := logs.String(); e.Mode() != ModeLandlock || !strings.Contains(l, "level=WARN msg=\"command isolation fell back to a weaker mode\" mode=landlock") {
			t.Errorf("auto's fallback to %s was not logged at warn:\n%s", e.Mode(), l)
		}
	}
	withoutLandlock(t)
	refused(Config{MinMode: ModeLandlock, WorkspaceRoot: workspace(t)},
		"commands would run in software mode, below --isolation-min landlock", "bwrap is not installed", "landlock unusable (the kernel has no Landlock")
	e, _ = newExec(t, ModeAuto, func(c *Config) { c.MinMode = ModeSoftware })
	if e.Mode() != ModeSoftware {
		t.Fatalf("auto without bwrap or Landlock, floor software: %s", e.Mode())
	}
}

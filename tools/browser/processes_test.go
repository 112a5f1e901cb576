package browser

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/agentbe/agentbe-daemon/internal/clip"
)

// TestSessionHoldsOnlyItsPage: once a page is loaded, a session's Chromium
// holds one renderer (the page's: no spare renderer, no preloaded omnibox
// WebUI), no network service process of its own and no browser_ui target,
// and every renderer, the GPU process and the zygotes keep their sandbox
// (seccomp filter, and no --no-sandbox). These are the memory levers of
// session.go's flags (docs/performance.md, "Browser").
func TestSessionHoldsOnlyItsPage(t *testing.T) {
	f := setup(t, nil)
	id := f.start(t)
	f.gotoPage(t, id, "/")
	f.must(t, "browser.snapshot", `{"sessionId":"`+id+`"}`)
	s := f.session(id)

	kinds := map[string]int{}
	for _, pid := range processesUsing(s.dir, false) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // gone since the listing
		}
		args := strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " "))
		if len(args) == 0 || !strings.Contains(args[0], "chrom") {
			continue
		}
		kind := "browser"
		for _, a := range args {
			if a == "--no-sandbox" {
				t.Errorf("pid %d runs without its sandbox: %s", pid, clip.String(strings.Join(args, " "), 300))
			}
			if v, ok := strings.CutPrefix(a, "--type="); ok {
				kind = v
			}
			if v, ok := strings.CutPrefix(a, "--utility-sub-type="); ok {
				kind += " " + v
			}
		}
		if strings.Contains(args[0], "crashpad") {
			kind = "crashpad"
		}
		kinds[kind]++
		if kind == "renderer" || kind == "gpu-process" {
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if !strings.Contains(string(status), "\nSeccomp:\t2\n") {
				t.Errorf("%s pid %d has no seccomp filter (its sandbox):\n%s", kind, pid, status)
			}
		}
	}
	t.Logf("the session's processes: %v", kinds)
	if kinds["renderer"] != 1 {
		t.Errorf("%d renderers for one page; want 1 (a spare renderer, or the omnibox popup's WebUI preloaded?)", kinds["renderer"])
	}
	if n := kinds["utility network.mojom.NetworkService"]; n != 0 {
		t.Errorf("%d network service processes; want it in the browser process (NetworkServiceInProcess2)", n)
	}
	if kinds["zygote"] == 0 {
		t.Errorf("no zygote: the sandbox's zygote is gone (%v)", kinds)
	}

	targets, err := cdp.Call(context.Background(), chromedp.FromContext(s.ctx).Browser, target.GetTargets, target.GetTargetsParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range targets.TargetInfos {
		if ti.Type != "page" {
			t.Errorf("a %s target %s besides the page", ti.Type, ti.URL)
		}
	}
}

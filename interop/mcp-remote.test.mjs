// Interop: the published RemoteFilesystemBackend (agent-backend 0.13.2 and
// 0.11.2) talks MCP to our binary's /mcp with its own client:
// getMCPClient() → list tools, call every tool with good and bad arguments,
// scoped clients see only their scope, a wrong token is refused.
//
// Run: cd interop && npm ci && node --test mcp-remote.test.mjs

import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync, existsSync, rmSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { startDaemon, tempRoot } from './lib/daemon.mjs'
import { writeFixture } from './lib/fixture.mjs'

const TOOLS = [
  'create_directory', 'directory_tree', 'edit_file', 'exec', 'get_file_info', 'grep',
  'list_allowed_directories', 'list_directory', 'list_directory_with_sizes', 'move_file',
  'read_media_file', 'read_multiple_files', 'read_text_file', 'search_files', 'write_file',
]

const text = (res) => res.content.map((c) => c.text ?? `[${c.type}]`).join('\n')

for (const pkg of ['agent-backend', 'agent-backend-0112']) {
  describe(`${pkg}: RemoteFilesystemBackend.getMCPClient() against /mcp`, () => {
    const token = 'mcp-interop-token'
    let mod, daemon, root
    const backends = []
    const backend = (extra = {}) => {
      const b = new mod.RemoteFilesystemBackend({ rootDir: root, host: '127.0.0.1', port: daemon.port, authToken: token, ...extra })
      backends.push(b)
      return b
    }

    // 0.11.2's getMCPClient() ignores its scopePath and sends no X-Root-Dir
    // (a client limitation); its getMCPTransport() sends both, so scoped and
    // root-checked clients are built from that transport for 0.11.2.
    const scopedClient = async (b, scopePath) => {
      if (pkg === 'agent-backend') return b.getMCPClient(scopePath)
      const client = new Client({ name: 'interop', version: '1.0.0' }, { capabilities: {} })
      await client.connect(await b.getMCPTransport(scopePath))
      return client
    }

    before(async () => {
      mod = await import(pkg)
      root = tempRoot()
      writeFixture(root)
      const keyDir = mkdtempSync(join(tmpdir(), 'agentbe-key-'))
      daemon = await startDaemon({ root, token, extraArgs: ['--ssh-host-key', join(keyDir, 'k')] })
    })
    after(async () => {
      for (const b of backends) await b.destroy().catch(() => {})
      await daemon?.stop()
      rmSync(root, { recursive: true, force: true })
    })

    test('lists every tool with title, description and annotations', async () => {
      const client = await backend().getMCPClient()
      const { tools } = await client.listTools()
      assert.deepEqual(tools.map((t) => t.name).sort(), TOOLS)
      for (const t of tools) {
        assert.ok(t.description, `${t.name} description`)
        assert.ok(t.annotations && typeof t.annotations.readOnlyHint === 'boolean', `${t.name} annotations`)
        assert.equal(t.inputSchema.type, 'object')
      }
    })

    test('calls every tool with good arguments', async () => {
      const c = await backend().getMCPClient()
      const call = async (name, args) => {
        const res = await c.callTool({ name, arguments: args })
        assert.ok(!res.isError, `${name} ${JSON.stringify(args)} failed: ${text(res)}`)
        return res
      }
      assert.equal(text(await call('read_text_file', { path: 'a.txt' })), 'line1\nline2\nline3\n')
      assert.equal(text(await call('read_text_file', { path: 'big.txt', offset: 10, limit: 2 })), '10\n11\n[showing lines 10-11 of 1,501.]')
      assert.match(text(await call('read_text_file', { path: 'big.txt' })), /\n1000\n\[showing lines 1-1,000 of 1,501; file is ~6 KB\. Call again with offset and limit to read more\.\]$/)
      const media = await call('read_media_file', { path: 'img.png' })
      assert.equal(media.content[0].type, 'image')
      assert.equal(media.content[0].mimeType, 'image/png')
      assert.equal(Buffer.from(media.content[0].data, 'base64').length, 11)
      assert.equal(text(await call('read_multiple_files', { paths: ['a.txt', 'b.txt'] })), 'a.txt:\nline1\nline2\nline3\n\n\n---\nb.txt:\nno newline\n')
      assert.equal(text(await call('write_file', { path: 'w/new.txt', content: 'new\n' })), 'Successfully wrote to w/new.txt')
      assert.equal(readFileSync(join(root, 'w/new.txt'), 'utf8'), 'new\n')
      assert.equal(text(await call('edit_file', { path: 'edit.txt', edits: [{ oldText: 'gamma', newText: 'GAMMA' }] })),
        '--- edit.txt\n+++ edit.txt\n@@ -1,6 +1,6 @@\n alpha\n beta\n-gamma\n+GAMMA\n delta\n epsilon\n zeta\n')
      assert.match(text(await call('edit_file', { path: 'dup.txt', edits: [{ oldText: 'foo', newText: 'x', replaceAll: true }], dryRun: true })), /^\[DRY RUN\]\n--- dup.txt/)
      assert.equal(text(await call('create_directory', { path: 'mk/a/b' })), 'Created directory: mk/a/b')
      assert.equal(text(await call('list_directory', { path: 'sub' })), '[DIR] deep\n[FILE] s.txt')
      assert.equal(text(await call('list_directory_with_sizes', { path: 'sub' })),
        '[DIR] deep                          \n[FILE] s.txt                          10 B\n\nTotal: 1 files, 1 directories\nCombined size: 10 B')
      assert.deepEqual(JSON.parse(text(await call('directory_tree', { path: 'sub' }))),
        [{ name: 'deep', type: 'directory', children: [{ name: 'd.md', type: 'file', size: 5 }] }, { name: 's.txt', type: 'file', size: 10 }])
      assert.equal(text(await call('move_file', { source: 'w/new.txt', destination: 'w2/moved.txt' })), 'Moved w/new.txt to w2/moved.txt')
      assert.equal(text(await call('search_files', { path: '.', pattern: '**/*.md' })), 'sub/deep/d.md')
      const info = JSON.parse(text(await call('get_file_info', { path: 'a.txt' })))
      assert.deepEqual(Object.keys(info), ['path', 'type', 'size', 'created', 'modified', 'accessed', 'mode'])
      assert.equal(info.type, 'file')
      assert.equal(info.mode, '100644')
      assert.equal(text(await call('list_allowed_directories', {})), `Allowed directories:\n- ${root}`)
      assert.equal(text(await call('exec', { command: 'echo "$GREETING from $(basename "$PWD")"', env: { GREETING: 'hi' } })), `hi from ${root.split('/').pop()}`)
      assert.equal(text(await call('grep', { pattern: 'secret', outputMode: 'count' })), 'users/u1/f.txt:1\nusers/u2/secret.txt:1')
      assert.equal(text(await call('grep', { pattern: 'nothing-matches-this' })), 'No matches found')
    })

    test('bad arguments are tool errors with readable messages', async () => {
      const c = await backend().getMCPClient()
      const fail = async (name, args, re) => {
        const res = await c.callTool({ name, arguments: args })
        assert.equal(res.isError, true, `${name} ${JSON.stringify(args)} should fail: ${text(res)}`)
        assert.match(text(res), re)
      }
      await fail('read_text_file', { path: 'missing.txt' }, /^Failed to read file: missing\.txt - no such file or directory/)
      await fail('read_text_file', { path: '../etc/passwd' }, /^Path escapes scope boundary: \.\.\/etc\/passwd$/)
      await fail('read_text_file', { path: 'a.txt', offset: 0 }, /^Input validation error: Invalid arguments for tool read_text_file: offset/)
      await fail('read_text_file', {}, /missing required argument "path"/)
      await fail('read_media_file', { path: 'a.txt' }, /^Unrecognized file type \.txt for read_media_file/)
      await fail('write_file', { path: '../x', content: 'x' }, /^Path escapes scope boundary/)
      await fail('edit_file', { path: 'dup.txt', edits: [{ oldText: 'foo', newText: 'x' }] }, /^edit 1: oldText appears 2 times in the file; pass replaceAll: true/)
      await fail('edit_file', { path: 'a.txt', edits: [{ oldText: 'zzz', newText: 'x' }] }, /^edit 1: could not find exact match for oldText/)
      await fail('list_directory', { path: 'missing' }, /^Failed to read directory: missing/)
      await fail('move_file', { source: 'nope', destination: 'x' }, /^Source does not exist: nope$/)
      await fail('move_file', { source: 'a.txt', destination: 'b.txt' }, /^Destination already exists: b\.txt$/)
      await fail('get_file_info', { path: 'missing' }, /^Failed to stat path: missing/)
      await fail('exec', { command: 'echo out; echo err >&2; exit 3' }, /^Command execution failed with exit code 3: err$/)
      await fail('exec', { command: '' }, /^Command cannot be empty$/)
      await fail('exec', { command: 'rm -rf /' }, /^Dangerous operation blocked \(DANGEROUS_OPERATION\): destructive-delete: /)
      await fail('list_directory_with_sizes', { path: '.', sortBy: 'bogus' }, /sortBy must be one of name, size/)
    })

    test('scoped clients see only their scope, concurrently', async () => {
      const b = backend()
      const [c1, c2] = await Promise.all([scopedClient(b, 'users/u1'), scopedClient(b, 'users/u2')])
      const call = async (c, name, args) => text(await c.callTool({ name, arguments: args }))
      const [l1, l2] = await Promise.all([
        call(c1, 'list_directory', { path: '.' }),
        call(c2, 'list_directory', { path: '.' }),
      ])
      assert.equal(l1, '[FILE] f.txt')
      assert.equal(l2, '[FILE] secret.txt')
      assert.equal(await call(c1, 'list_allowed_directories', {}), `Allowed directories:\n- ${join(root, 'users/u1')}`)
      assert.equal(await call(c1, 'read_text_file', { path: '../u2/secret.txt' }), 'Path escapes scope boundary: ../u2/secret.txt')
      assert.equal(await call(c1, 'write_file', { path: '/abs.txt', content: 'scoped' }), 'Successfully wrote to /abs.txt')
      assert.equal(readFileSync(join(root, 'users/u1/abs.txt'), 'utf8'), 'scoped')
      assert.equal(await call(c2, 'exec', { command: 'pwd' }), join(root, 'users/u2'))
      // A scope that does not exist yet is created on first write.
      const c3 = await scopedClient(b, 'users/new')
      assert.equal(await call(c3, 'write_file', { path: 'x.txt', content: 'x' }), 'Successfully wrote to x.txt')
      assert.ok(existsSync(join(root, 'users/new/x.txt')))
    })

    test('50 concurrent tool calls', async () => {
      const c = await backend().getMCPClient()
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) =>
        c.callTool({ name: 'write_file', arguments: { path: `conc/${i}.txt`, content: String(i) } })
          .then(() => c.callTool({ name: 'read_text_file', arguments: { path: `conc/${i}.txt` } }))))
      results.forEach((r, i) => assert.equal(text(r), String(i)))
    })

    test('a wrong token is refused', async () => {
      const b = backend({ authToken: 'wrong' })
      await assert.rejects(b.getMCPClient(), /401|Unauthorized/)
    })

    test('a wrong root is refused', async () => {
      const b = backend({ rootDir: '/somewhere/else' })
      await assert.rejects(scopedClient(b), /403|Root directory mismatch/)
    })
  })
}

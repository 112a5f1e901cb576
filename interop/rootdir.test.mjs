// Interop: the published RemoteFilesystemBackend (agent-backend 0.13.2, and
// 0.11.2 through the npm alias agent-backend-0112) configured with a rootDir
// that is not the daemon's --root. Every way it reaches the daemon (a file
// write, whose mkdir -p runs over /ssh; a command; MCP over /mcp with
// X-Root-Dir) fails with the daemon's one line naming both roots and the
// option to change, rather than "mkdir writes to …, a system path".
//
// Run: cd interop && npm ci && node --test rootdir.test.mjs
// The binary is $AGENTBE_BIN, or built from this checkout (lib/daemon.mjs).

import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { startDaemon, tempRoot, freePort } from './lib/daemon.mjs'

const clients = [
  { name: '0.13.2', pkg: 'agent-backend' },
  { name: '0.11.2', pkg: 'agent-backend-0112' },
]

const clientRoot = '/home/you/workspace'

for (const client of clients) {
  describe(`RemoteFilesystemBackend ${client.name} with another rootDir`, () => {
    const token = 'rootdir-token-' + client.name
    let mod, root, port, daemon
    const backends = []

    const newBackend = (rootDir) => {
      const b = new mod.RemoteFilesystemBackend({
        rootDir, host: '127.0.0.1', port, authToken: token, reconnection: { enabled: false },
      })
      backends.push(b)
      return b
    }

    // What the daemon says: the reference's words, then both options.
    const mismatch = () => new RegExp(
      `Server is configured for ${root}, not ${clientRoot}: the client's root directory differs from the daemon's; ` +
      `set the client's rootDir to ${root}, or start the daemon with --root ${clientRoot}`)

    before(async () => {
      mod = await import(client.pkg)
      root = tempRoot('agentbe-rootdir-')
      port = await freePort()
      daemon = await startDaemon({ root, port, token })
    })

    after(async () => {
      for (const b of backends) await b.destroy().catch(() => {})
      await daemon?.stop()
      rmSync(root, { recursive: true, force: true })
    })

    test('a write names both roots', async () => {
      const b = newBackend(clientRoot)
      await assert.rejects(b.write('x.txt', 'hi'), (err) => {
        assert.match(err.message, mismatch())
        assert.doesNotMatch(err.message, /system path/)
        return true
      })
      assert.equal(existsSync(join(root, 'home')), false, 'nothing written inside the workspace')
    })

    test('a command names both roots', async () => {
      const b = newBackend(clientRoot)
      await assert.rejects(b.exec('echo hi'), (err) => {
        assert.match(err.message, mismatch())
        return true
      })
    })

    test('MCP names both roots', async (t) => {
      if (typeof mod.createAgentBeMCPClient !== 'function') {
        t.skip(`${client.name} has no createAgentBeMCPClient`)
        return
      }
      await assert.rejects(
        mod.createAgentBeMCPClient({ url: `http://127.0.0.1:${port}`, authToken: token, rootDir: clientRoot }),
        (err) => {
          assert.match(err.message, /Root directory mismatch/)
          assert.match(err.message, mismatch())
          return true
        })
    })

    test('the daemon\'s own root still works', async () => {
      const b = newBackend(root)
      await b.write('ok/x.txt', 'hi')
      assert.equal(await b.read('ok/x.txt'), 'hi')
      assert.equal(String(await b.exec('cat ok/x.txt')).trim(), 'hi')
    })
  })
}

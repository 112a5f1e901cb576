// Interop: the published RemoteFilesystemBackend (agent-backend 0.13.2, and
// 0.11.2 through the npm alias agent-backend-0112, whose client sends the
// token as ?token=) against our binary's /ssh endpoint.
//
// Run: cd interop && npm ci && node --test remote-ssh.test.mjs
// The binary is $AGENTBE_BIN, or built from this checkout (lib/daemon.mjs).

import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startDaemon, tempRoot, freePort } from './lib/daemon.mjs'

const clients = [
  { name: '0.13.2', pkg: 'agent-backend' },
  { name: '0.11.2', pkg: 'agent-backend-0112' },
]

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

for (const client of clients) {
  describe(`RemoteFilesystemBackend ${client.name} over /ssh`, () => {
    const token = 'interop-token-' + client.name
    let mod, root, port, daemon, keyPath
    const backends = []

    // The same root, port and host key every time, so a restarted daemon is
    // the same daemon to the client.
    const start = () => startDaemon({ root, port, token, extraArgs: ['--ssh-host-key', keyPath] })

    const newBackend = (extra = {}) => {
      const b = new mod.RemoteFilesystemBackend({
        rootDir: root, host: '127.0.0.1', port, authToken: token, ...extra,
      })
      backends.push(b)
      return b
    }

    before(async () => {
      mod = await import(client.pkg)
      root = tempRoot('agentbe-interop-')
      keyPath = join(mkdtempSync(join(tmpdir(), 'agentbe-key-')), 'host_key')
      port = await freePort()
      daemon = await start()
    })

    after(async () => {
      for (const b of backends) await b.destroy().catch(() => {})
      await daemon?.stop()
      rmSync(root, { recursive: true, force: true })
    })

    test('write and read text and binary', async () => {
      const b = newBackend()
      await b.write('notes/hello.txt', 'héllo wörld\n')
      assert.equal(await b.read('notes/hello.txt'), 'héllo wörld\n')
      assert.equal(readFileSync(join(root, 'notes/hello.txt'), 'utf8'), 'héllo wörld\n')
      const bin = Buffer.from(Array.from({ length: 70000 }, (_, i) => (i * 7) & 0xff))
      await b.write('bin/data.bin', bin)
      const back = await b.read('bin/data.bin', { encoding: 'buffer' })
      assert.ok(Buffer.isBuffer(back))
      assert.ok(bin.equals(back), 'binary round trip')
    })

    test('readdir, readdirWithStats, stat, exists', async () => {
      const b = newBackend()
      mkdirSync(join(root, 'ls/sub'), { recursive: true })
      writeFileSync(join(root, 'ls/a.txt'), 'aaa')
      writeFileSync(join(root, 'ls/b.txt'), 'b')
      assert.deepEqual((await b.readdir('ls')).sort(), ['a.txt', 'b.txt', 'sub'])
      const withStats = await b.readdirWithStats('ls')
      const byName = Object.fromEntries(withStats.map((e) => [e.name, e.stats]))
      assert.equal(byName['a.txt'].size, 3)
      assert.equal(byName['sub'].mode & 0o170000, 0o040000, 'directory type bits')
      const st = await b.stat('ls/a.txt')
      assert.equal(st.size, 3)
      assert.ok(st.isFile())
      assert.ok((await b.stat('ls/sub')).isDirectory())
      assert.equal(await b.exists('ls/a.txt'), true)
      assert.equal(await b.exists('ls/nope.txt'), false)
      await assert.rejects(b.stat('ls/nope.txt'))
    })

    test('mkdir recursive, rename, touch, rm recursive+force', async () => {
      const b = newBackend()
      await b.mkdir('m/x/y/z', { recursive: true })
      assert.ok(existsSync(join(root, 'm/x/y/z')))
      await b.write('m/from.txt', 'moving')
      await b.rename('m/from.txt', 'm/to/dest.txt')
      assert.equal(readFileSync(join(root, 'm/to/dest.txt'), 'utf8'), 'moving')
      assert.ok(!existsSync(join(root, 'm/from.txt')))
      await b.touch('m/touched.txt')
      assert.ok(existsSync(join(root, 'm/touched.txt')))
      await b.rm('m', { recursive: true, force: true })
      assert.ok(!existsSync(join(root, 'm')))
      await b.rm('m/never-existed', { recursive: true, force: true })
    })

    test('exec with env, failing exec, 1 MiB of output', async () => {
      const b = newBackend()
      assert.equal(await b.exec('pwd'), root)
      assert.equal(await b.exec('echo "$HOME"'), root)
      // The client sends `HOME='<cwd>' GREETING='hi there' cd "<cwd>" && <command>`
      // (its buildFullCommand): the assignments prefix the `cd` builtin only, so
      // the shell drops them before the command runs. The reference daemon
      // gives the same "[]"; what matters here is that the prefixed command
      // is accepted and runs in the right place.
      const out = await b.exec('echo "[$GREETING]" && pwd', { env: { GREETING: 'hi there' } })
      assert.equal(out, `[]\n${root}`)
      await assert.rejects(b.exec('echo bad >&2; exit 3'), (err) => {
        assert.equal(err.code, 'EXEC_FAILED')
        assert.match(err.message, /exit code 3/)
        assert.match(err.message, /bad/)
        return true
      })
      const big = await b.exec('head -c 1048576 /dev/zero | tr "\\0" x')
      assert.equal(big.length, 1048576)
    })

    test('the same in backend.scope("users/u1")', async () => {
      const b = newBackend()
      const s = b.scope('users/u1')
      await s.write('f.txt', 'scoped')
      assert.equal(readFileSync(join(root, 'users/u1/f.txt'), 'utf8'), 'scoped')
      assert.equal(await s.read('f.txt'), 'scoped')
      assert.deepEqual(await s.readdir('.'), ['f.txt'])
      assert.equal(await s.exec('pwd'), join(root, 'users/u1'))
      await s.mkdir('d/e', { recursive: true })
      assert.ok(existsSync(join(root, 'users/u1/d/e')))
      await s.rename('f.txt', 'd/g.txt')
      assert.equal(await s.exists('d/g.txt'), true)
      await s.rm('d', { recursive: true, force: true })
      assert.equal(await s.exists('d'), false)
      await assert.rejects(s.read('../u2/secret'))
    })

    test('50 concurrent operations', async () => {
      const b = newBackend()
      const ops = []
      for (let i = 0; i < 50; i++) {
        ops.push(i % 2
          ? b.write(`conc/f${i}.txt`, `v${i}`).then(() => b.read(`conc/f${i}.txt`)).then((v) => assert.equal(v, `v${i}`))
          : b.exec(`echo ${i}`).then((v) => assert.equal(v, String(i))))
      }
      await Promise.all(ops)
    })

    test('1 s keepalive over a 5 s idle', async () => {
      const b = newBackend({ keepaliveIntervalMs: 1000 })
      const seen = []
      b.onStatusChange((e) => seen.push(typeof e === 'string' ? e : e?.status ?? e?.to ?? String(e)))
      assert.equal(await b.exec('echo before'), 'before')
      await sleep(5000)
      assert.equal(await b.exec('echo after'), 'after')
      assert.equal(b.status, 'connected')
      assert.ok(!seen.includes('disconnected') && !seen.includes('reconnecting'), `statuses: ${seen}`)
    })

    test('wrong token', async () => {
      const b = new mod.RemoteFilesystemBackend({
        rootDir: root, host: '127.0.0.1', port, authToken: 'wrong',
        reconnection: { enabled: true, initialDelayMs: 100, maxRetries: 3 },
      })
      backends.push(b)
      const seen = []
      b.onStatusChange((e) => seen.push(typeof e === 'string' ? e : e?.status ?? e?.to ?? String(e)))
      const err = await b.exec('true').then(() => null, (e) => e)
      assert.ok(err, 'exec with a wrong token must fail')
      if (client.name === '0.13.2') {
        // 0.13 maps close code 4001 to AUTH_FAILED and does not retry.
        assert.equal(err.code, 'AUTH_FAILED', err.message)
        await sleep(1000)
        assert.ok(!seen.includes('reconnecting'), `statuses: ${seen}`)
      }
    })

    test('daemon restart during use: the client reconnects', async () => {
      const b = newBackend({ reconnection: { enabled: true, initialDelayMs: 200, maxDelayMs: 1000, maxRetries: 0 } })
      assert.equal(await b.exec('echo up'), 'up')
      const seen = []
      b.onStatusChange((e) => seen.push(typeof e === 'string' ? e : e?.status ?? e?.to ?? String(e)))
      await daemon.stop()
      daemon = await start()
      let ok = false
      for (let i = 0; i < 100 && !ok; i++) {
        try {
          ok = (await b.exec('echo again')) === 'again'
        } catch { await sleep(200) }
      }
      assert.ok(ok, `never reconnected; statuses: ${seen}`)
      assert.ok(seen.includes('disconnected'), `statuses: ${seen}`)
      assert.equal(b.status, 'connected')
    })
  })
}

// The npm client's conventional-SSH transport (RemoteFilesystemBackend with
// transport: 'ssh', agent-backend 0.13.2) against our SSH port
// (--ssh-listen), with key and with password authentication, unchanged.

import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs'
import { execFileSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startDaemon, tempRoot, freePort } from './lib/daemon.mjs'

// bcrypt of "interop-password-7" (cost 10), the file --ssh-password-hash-file reads.
const passwordHash = '$2a$10$knxSNwnBqnzGX83FZRPVROpXefOVqX7Wmxw/z9fz7LVIWe/r7v5cu'

describe('RemoteFilesystemBackend over the SSH port (transport ssh)', () => {
  let mod, root, daemon, sshPort, privateKey, otherKey
  const backends = []
  const backend = (sshAuth) => {
    const b = new mod.RemoteFilesystemBackend({ rootDir: root, host: '127.0.0.1', port: sshPort, transport: 'ssh', sshAuth })
    backends.push(b)
    return b
  }

  before(async () => {
    mod = await import('agent-backend')
    const dir = mkdtempSync(join(tmpdir(), 'agentbe-sshport-'))
    for (const name of ['key', 'other']) {
      execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', join(dir, name)])
    }
    privateKey = readFileSync(join(dir, 'key'), 'utf8')
    otherKey = readFileSync(join(dir, 'other'), 'utf8')
    writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'key.pub')))
    writeFileSync(join(dir, 'hash'), passwordHash + '\n')
    root = tempRoot('agentbe-sshport-root-')
    sshPort = await freePort()
    daemon = await startDaemon({
      root,
      extraArgs: ['--ssh-host-key', join(dir, 'host_key'), '--ssh-listen', `127.0.0.1:${sshPort}`,
        '--ssh-authorized-keys', join(dir, 'authorized_keys'), '--ssh-password-hash-file', join(dir, 'hash')],
    })
  })

  after(async () => {
    for (const b of backends) await b.destroy().catch(() => {})
    await daemon?.stop()
    rmSync(root, { recursive: true, force: true })
  })

  test('key authentication: files and exec', async () => {
    const b = backend({ type: 'key', credentials: { username: 'agent', privateKey } })
    await b.write('notes/a.txt', 'over the SSH port\n')
    assert.equal(await b.read('notes/a.txt'), 'over the SSH port\n')
    assert.equal(readFileSync(join(root, 'notes/a.txt'), 'utf8'), 'over the SSH port\n')
    assert.deepEqual(await b.readdir('notes'), ['a.txt'])
    assert.equal(String(await b.exec('cat notes/a.txt')).trim(), 'over the SSH port')
    await assert.rejects(b.exec('sudo id'), /privilege-escalation|Dangerous/)
  })

  test('password authentication', async () => {
    const b = backend({ type: 'password', credentials: { username: 'agent', password: 'interop-password-7' } })
    await b.write('p.txt', 'pw')
    assert.equal(await b.read('p.txt'), 'pw')
  })

  test('a wrong key and a wrong password are refused', async () => {
    await assert.rejects(backend({ type: 'key', credentials: { username: 'agent', privateKey: otherKey } }).read('p.txt'))
    await assert.rejects(backend({ type: 'password', credentials: { username: 'agent', password: 'nope' } }).read('p.txt'))
  })
})

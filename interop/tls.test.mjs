// Interop: the published RemoteFilesystemBackend (0.13.2) with `secure: true`
// against our daemon serving TLS itself (--tls-cert/--tls-key): SSH over wss://
// and MCP over https://, trusting a test CA through NODE_EXTRA_CA_CERTS, as a
// user with a private CA would. A control run without the CA must fail: it
// shows the client really verified our certificate.
//
// Run: cd interop && npm ci && node --test tls.test.mjs  (needs openssl)

import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startDaemon } from './lib/daemon.mjs'

const here = dirname(fileURLToPath(import.meta.url))

describe('RemoteFilesystemBackend 0.13.2 with secure: true against built-in TLS', () => {
  const token = 'interop-tls-token'
  let daemon, cert

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agentbe-tls-'))
    cert = join(dir, 'cert.pem')
    const key = join(dir, 'key.pem')
    // A self-signed certificate for the loopback address the client dials.
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
      '-nodes', '-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1',
      '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'], { stdio: 'pipe' })
    daemon = await startDaemon({
      token,
      tls: { cert, key, ca: cert },
      extraArgs: ['--ssh-host-key', join(dir, 'host_key')],
    })
  })

  after(async () => { await daemon?.stop() })

  const runClient = (env) => spawnSync(process.execPath,
    [join(here, 'lib', 'tls-client.mjs'), JSON.stringify({ root: daemon.root, port: daemon.port, token })],
    { cwd: here, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 })

  test('files, exec and MCP work over wss:// and https://', () => {
    const r = runClient({ NODE_EXTRA_CA_CERTS: cert })
    assert.equal(r.status, 0, `client failed:\n${r.stderr}\ndaemon:\n${daemon.stderr()}`)
    const got = JSON.parse(r.stdout.trim().split('\n').pop())
    assert.equal(got.read, 'over wss')
    assert.equal(got.exec, '42')
    assert.ok(got.tools.includes('read_text_file') && got.tools.includes('exec'), `tools: ${got.tools}`)
    assert.equal(got.mcpText, 'over wss')
    assert.match(daemon.stderr(), /tls=true/)
  })

  test('without the CA the client refuses our certificate', () => {
    const env = { NODE_EXTRA_CA_CERTS: '' }
    const r = runClient(env)
    assert.notEqual(r.status, 0, `an untrusted certificate was accepted:\n${r.stdout}`)
    assert.match(r.stderr, /self[- ]signed|certificate|CERT/i)
  })
})

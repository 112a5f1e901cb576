// Shared harness of the interop suite: build the Go binary once, start
// `agent-backend daemon` on a free loopback port with a temp root, wait for
// /health, stop it. Every *.test.mjs imports this instead of spawning by hand.
//
//   import { agentBackendBinary, startDaemon, tempRoot } from './lib/daemon.mjs'
//   const d = await startDaemon({ token: 't' })   // d.url, d.mcpUrl, d.root, d.port
//   ...
//   await d.stop()
//
// $AGENTBE_BIN points at a prebuilt binary (CI builds it once); otherwise the
// binary is built from this checkout with `go build` into a temp dir, once
// per process.

import { spawn, execFileSync } from 'node:child_process'
import https from 'node:https'
import { mkdtempSync, readFileSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import net from 'node:net'

const here = dirname(fileURLToPath(import.meta.url))
export const repoRoot = join(here, '..', '..')

let binary = process.env.AGENTBE_BIN

/** Path of the agent-backend binary (built on first use). */
export function agentBackendBinary() {
  if (!binary) {
    const dir = mkdtempSync(join(tmpdir(), 'agentbe-bin-'))
    binary = join(dir, 'agent-backend')
    execFileSync('go', ['build', '-o', binary, './cmd/agent-backend'], { cwd: repoRoot, stdio: 'inherit' })
  }
  return binary
}

/** Directory holding the binary, to put first on PATH for clients that spawn `agent-backend`. */
export function binaryDir() {
  return dirname(agentBackendBinary())
}

/** A fresh temp directory (real path, so roots compare equal to what the daemon reports). */
export function tempRoot(prefix = 'agentbe-root-') {
  return realpathSync(mkdtempSync(join(tmpdir(), prefix)))
}

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
    s.on('error', reject)
  })
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * Start `agent-backend daemon` and wait until /health answers.
 * Options: root (default: a new temp dir), port (default: a free one), token,
 * isolation (default 'software'), scopePath, extraArgs, env, and tls
 * ({ cert, key, ca }: PEM file paths; the daemon then serves https/wss and
 * /health is checked trusting ca).
 * Returns { child, root, port, url, mcpUrl, stderr(), stop() }.
 */
export async function startDaemon(opts = {}) {
  const root = opts.root ?? tempRoot()
  const port = opts.port ?? await freePort()
  const args = ['daemon', '--rootDir', root, '--port', String(port), '--isolation', opts.isolation ?? 'software']
  if (opts.token) args.push('--auth-token', opts.token)
  if (opts.scopePath) args.push('--scopePath', opts.scopePath)
  if (opts.tls) args.push('--tls-cert', opts.tls.cert, '--tls-key', opts.tls.key)
  if (opts.extraArgs) args.push(...opts.extraArgs)
  // The suite runs a second time with MCP sessions on (.ci/run): the
  // published clients must work unchanged in both modes.
  if (process.env.AGENTBE_INTEROP_MCP_SESSIONS === '1' && !args.includes('--mcp-sessions') && !args.includes('--local-only')) {
    args.push('--mcp-sessions')
  }
  const child = spawn(agentBackendBinary(), args, {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...(opts.env ?? {}) },
  })
  let stderr = ''
  child.stderr.on('data', (d) => { stderr += d })
  const exited = new Promise((r) => child.once('exit', r))
  const url = `${opts.tls ? 'https' : 'http'}://127.0.0.1:${port}`
  for (let i = 0; i < 400; i++) {
    if (child.exitCode !== null) break
    try {
      const ok = opts.tls ? await httpsOK(`${url}/health`, opts.tls.ca) : (await fetch(`${url}/health`)).ok
      if (ok) {
        return {
          child, root, port, url,
          mcpUrl: `${url}/mcp`,
          stderr: () => stderr,
          async stop() {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
            await exited
          },
        }
      }
    } catch { /* not up yet */ }
    await sleep(50)
  }
  child.kill('SIGKILL')
  await exited
  throw new Error(`daemon did not become healthy (args ${args.join(' ')}): ${stderr}`)
}

/** GET url over https trusting the PEM file ca; resolves whether it answered 200. */
function httpsOK(url, ca) {
  return new Promise((resolve, reject) => {
    https.get(url, { ca: readFileSync(ca) }, (res) => {
      res.resume()
      resolve(res.statusCode === 200)
    }).on('error', reject)
  })
}

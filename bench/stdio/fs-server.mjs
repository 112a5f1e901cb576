// Our daemon over stdio (`agent-backend daemon --local-only`) beside the
// official MCP filesystem server (@modelcontextprotocol/server-filesystem),
// both as their own processes, driven the same way: the MCP TypeScript SDK's
// stdio client, on the same fixture (2,000 files in 100 folders, a 4 KiB file
// and a file of 999 lines of 1 KiB). Rounds alternate which server goes
// first; each round starts both fresh. Per round and server:
//   - start: from spawn until initialize has been answered;
//   - read 4 KiB: read_text_file, 200 calls, p50 and p99;
//   - read 1 MiB: read_text_file of the 999-line file (1 MB), 20 calls, p50;
//   - tree: directory_tree of the 2,000 files (default excludes), 20 calls, p50.
// The figure is the median over rounds. It needs interop/'s node_modules
// (cd interop && npm ci) and a built binary:
//
//	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /tmp/agent-backend ./cmd/agent-backend
//	AGENTBE_BIN=/tmp/agent-backend ROUNDS=5 node bench/stdio/fs-server.mjs
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const interop = path.join(here, '..', '..', 'interop')
const require = createRequire(path.join(interop, 'package.json'))
const { Client } = require('@modelcontextprotocol/sdk/client/index.js')
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js')
const official = require.resolve('@modelcontextprotocol/server-filesystem/dist/index.js')

const bin = process.env.AGENTBE_BIN
if (!bin) {
  console.error('set AGENTBE_BIN to a built agent-backend (see the comment at the top)')
  process.exit(2)
}
const rounds = Number(process.env.ROUNDS || 5)

const root = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'agentbe-stdio-fs-')))
const tree = path.join(root, 'tree')
for (let d = 0; d < 100; d++) {
  const dir = path.join(tree, `dir${String(d).padStart(3, '0')}`)
  fs.mkdirSync(dir, { recursive: true })
  for (let f = 0; f < 20; f++) fs.writeFileSync(path.join(dir, `file${f}.txt`), 'x')
}
const line64 = '0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n'
fs.writeFileSync(path.join(root, 'f4k.txt'), line64.repeat(64))
fs.writeFileSync(path.join(root, 'f1m.txt'), ('0123456789abcdef'.repeat(65) + '\n').repeat(999)) // under read_text_file's default page of 1,000 lines

const servers = {
  ours: { command: bin, args: ['daemon', '--root', root, '--local-only', '--isolation', 'software', '--log-level', 'error'], path: p => p },
  official: { command: process.execPath, args: [official, root], path: p => path.join(root, p) },
}

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]
}
const median = xs => pct(xs, 50)

async function timed(n, fn) {
  const ts = []
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    await fn()
    ts.push(performance.now() - t)
  }
  return ts
}

async function round(name) {
  const s = servers[name]
  const t0 = performance.now()
  const transport = new StdioClientTransport({ command: s.command, args: s.args, stderr: 'ignore' })
  const client = new Client({ name: 'stdio-bench', version: '1' })
  await client.connect(transport)
  const start = performance.now() - t0
  const call = async (tool, args, check) => {
    const r = await client.callTool({ name: tool, arguments: args })
    const text = r.content?.[0]?.text ?? ''
    if (r.isError || !check(text)) throw new Error(`${name} ${tool}: ${text.slice(0, 200)}`)
  }
  const read4k = () => call('read_text_file', { path: s.path('f4k.txt') }, t => t.startsWith(line64) && t.length >= 4095)
  const read1m = () => call('read_text_file', { path: s.path('f1m.txt') }, t => t.length >= 1_039_000)
  const dirTree = () => call('directory_tree', { path: s.path('tree') }, t => t.includes('dir099') && t.includes('file19.txt'))
  await timed(20, read4k) // warm-up
  const r4 = await timed(200, read4k)
  const r1 = await timed(20, read1m)
  const tr = await timed(20, dirTree)
  await client.close()
  return { start, read4kP50: median(r4), read4kP99: pct(r4, 99), read1mP50: median(r1), treeP50: median(tr) }
}

const results = { ours: [], official: [] }
for (let r = 0; r < rounds; r++) {
  const order = r % 2 === 0 ? ['ours', 'official'] : ['official', 'ours']
  for (const name of order) results[name].push(await round(name))
}
fs.rmSync(root, { recursive: true, force: true })

const rows = [
  ['start to initialized', 'start'],
  ['read_text_file 4 KiB p50', 'read4kP50'],
  ['read_text_file 4 KiB p99', 'read4kP99'],
  ['read_text_file 1 MiB p50', 'read1mP50'],
  ['directory_tree 2,000 files p50', 'treeP50'],
]
console.log(`${rounds} rounds each, alternating; medians over rounds (ms); ratio = official / ours\n`)
console.log('| figure | ours | official | ratio | ours, lowest – highest |')
console.log('|---|---:|---:|---:|---|')
for (const [label, k] of rows) {
  const o = median(results.ours.map(x => x[k]))
  const f = median(results.official.map(x => x[k]))
  const lo = Math.min(...results.ours.map(x => x[k]))
  const hi = Math.max(...results.ours.map(x => x[k]))
  console.log(`| ${label} | ${o.toFixed(2)} | ${f.toFixed(2)} | ${(f / o).toFixed(2)}× | ${lo.toFixed(2)} – ${hi.toFixed(2)} |`)
}

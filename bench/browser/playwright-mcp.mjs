// Measures @playwright/mcp on the page the browser provider's benchmarks
// load (tools/browser/bench_test.go), to put its figures beside ours:
//   - start: from the first tools/call until browser_navigate to about:blank
//     returns (Playwright MCP starts its browser on first use);
//   - goto+snapshot: browser_navigate of the local page, then
//     browser_snapshot, 50 times; the median is printed;
//   - memory: after the page is loaded and a snapshot taken, the PSS of the
//     Playwright MCP process and every process below it (its Chromium),
//     summed, as BenchmarkSessionMemory sums a session's processes.
//
// It needs @playwright/mcp and @modelcontextprotocol/sdk installed in the
// directory named by PW_MCP_DIR (npm install @playwright/mcp@0.0.83
// @modelcontextprotocol/sdk), and Chromium at CHROMIUM (/usr/bin/chromium).
// Run: PW_MCP_DIR=/tmp/pwmcp node bench/browser/playwright-mcp.mjs
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { createRequire } from 'node:module'

const dir = process.env.PW_MCP_DIR
if (!dir) {
  console.error('set PW_MCP_DIR to a directory with @playwright/mcp and @modelcontextprotocol/sdk installed')
  process.exit(2)
}
const require = createRequire(path.join(dir, 'package.json'))
const { Client } = require('@modelcontextprotocol/sdk/client/index.js')
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js')
const chromium = process.env.CHROMIUM || '/usr/bin/chromium'
const runs = Number(process.env.RUNS || 50)

// The same home page as tools/browser/browser_test.go's site().
const page = `<!doctype html><html><head><title>Home</title></head><body>
<h1>Welcome</h1>
<p id="out">not clicked</p>
<button id="b" onclick="document.getElementById('out').textContent='clicked'">Press me</button>
<label>Name <input id="name" type="text"></label>
<form action="/search" method="get"><input id="q" name="q" type="search" aria-label="Query"></form>
<select id="color"><option value="r">Red</option><option value="g">Green</option></select>
<a href="/other">Other page</a> <a href="https://example.com/x">Example</a>
</body></html>`
const server = http.createServer((req, res) => { res.setHeader('Content-Type', 'text/html'); res.end(page) })
await new Promise(r => server.listen(0, '127.0.0.1', r))
const base = `http://127.0.0.1:${server.address().port}`

// As root, Chromium needs --no-sandbox under Playwright (it does not drop
// privileges); Playwright MCP's default is no sandbox anyway.
// Its snapshot files go to a temporary directory, not the working one.
const outDir = fs.mkdtempSync(path.join(os.tmpdir(), 'playwright-mcp-'))
const args = [path.join(dir, 'node_modules/@playwright/mcp/cli.js'), '--headless', '--isolated', '--executable-path', chromium,
  '--viewport-size', '800x600', '--no-sandbox', '--output-dir', outDir]
const transport = new StdioClientTransport({ command: process.execPath, args, stderr: 'ignore' })
const client = new Client({ name: 'bench', version: '1' })
await client.connect(transport)

const call = async (name, a) => {
  const r = await client.callTool({ name, arguments: a })
  if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`)
  return r
}
let t0 = performance.now()
await call('browser_navigate', { url: 'about:blank' })
const start = performance.now() - t0

await call('browser_navigate', { url: base + '/' })
await call('browser_snapshot', {})
const pssMiB = treePssKiB(transport.pid) / 1024
const samples = []
for (let i = 0; i < runs; i++) {
  t0 = performance.now()
  await call('browser_navigate', { url: `${base}/?i=${i}` })
  await call('browser_snapshot', {})
  samples.push(performance.now() - t0)
}
samples.sort((a, b) => a - b)
console.log(`playwright-mcp start (first navigate, browser launch included): ${start.toFixed(0)} ms`)
console.log(`playwright-mcp goto+snapshot over ${runs} runs: p50 ${samples[Math.floor(samples.length / 2)].toFixed(1)} ms, min ${samples[0].toFixed(1)} ms, max ${samples[samples.length - 1].toFixed(1)} ms`)
console.log(`playwright-mcp memory (PSS of its process tree after a page and a snapshot): ${pssMiB.toFixed(1)} MiB`)
await client.close()
server.close()
fs.rmSync(outDir, { recursive: true, force: true })

// treePssKiB sums the Pss of pid and its descendants (/proc/*/stat's ppid).
function treePssKiB (root) {
  const parent = new Map()
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8')
      parent.set(Number(e), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]))
    } catch {}
  }
  let kib = 0
  for (const pid of parent.keys()) {
    let p = pid
    while (p > 1 && p !== root) p = parent.get(p) ?? 0
    if (p !== root) continue
    try {
      const m = /^Pss:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))
      if (m) kib += Number(m[1])
    } catch {}
  }
  return kib
}

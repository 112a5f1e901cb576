// One operation of the published npm client (agent-backend 0.13.2's
// RemoteFilesystemBackend) against a running daemon, n times with the given
// concurrency; prints {"nsPerOp": ...}. client/bench_test.go's
// BenchmarkRemoteClients runs it beside the Go client on the same daemon.
//
//   node bench/npm-remote-client.mjs HOST PORT ROOT TOKEN OP N CONCURRENCY
//   OP: read4k | write4k | readdir100 | exec-true
import { RemoteFilesystemBackend } from 'agent-backend'

const [host, port, rootDir, authToken, op, nArg, concArg] = process.argv.slice(2)
const n = Number(nArg)
const conc = Number(concArg)
const backend = new RemoteFilesystemBackend({ rootDir, host, port: Number(port), authToken })
const data = 'x'.repeat(4096)
const ops = {
  read4k: () => backend.read('bench/4k.txt'),
  write4k: () => backend.write('bench/w.txt', data),
  readdir100: () => backend.readdir('bench/dir100'),
  'exec-true': () => backend.exec('true'),
}
const run = ops[op]
if (!run) throw new Error(`unknown op ${op}`)
await run() // connect and warm up
let next = 0
const start = process.hrtime.bigint()
await Promise.all(Array.from({ length: conc }, async () => {
  while (next < n) {
    next++
    await run()
  }
}))
const ns = Number(process.hrtime.bigint() - start)
console.log(JSON.stringify({ nsPerOp: ns / n }))
await backend.destroy()

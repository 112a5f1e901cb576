// Run as a child process by tls.test.mjs, because Node reads
// NODE_EXTRA_CA_CERTS only at start-up. It drives agent-backend 0.13.2's
// RemoteFilesystemBackend with `secure: true` (wss:// for SSH, https:// for
// MCP) and prints what it saw as one JSON line; any failure exits 1 with the
// error on stderr.
//
//   node lib/tls-client.mjs '{"root":"/tmp/x","port":1234,"token":"t"}'

import { RemoteFilesystemBackend } from 'agent-backend'

const { root, port, token } = JSON.parse(process.argv[2])
const b = new RemoteFilesystemBackend({ rootDir: root, host: '127.0.0.1', port, authToken: token, secure: true })
try {
  await b.write('tls/hello.txt', 'over wss')
  const read = String(await b.read('tls/hello.txt'))
  const exec = String(await b.exec('echo "$((6*7))"')).trim()
  const mcp = await b.getMCPClient()
  const tools = (await mcp.listTools()).tools.map((t) => t.name)
  const call = await mcp.callTool({ name: 'read_text_file', arguments: { path: 'tls/hello.txt' } })
  console.log(JSON.stringify({ read, exec, tools, mcpText: call.content?.[0]?.text ?? '' }))
  await b.destroy()
  process.exit(0)
} catch (e) {
  console.error(e?.stack ?? String(e))
  await b.destroy().catch(() => {})
  process.exit(1)
}

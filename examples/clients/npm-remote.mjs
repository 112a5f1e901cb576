// The published npm client (agent-backend 0.13.x) against a running daemon:
// files over SSH-over-WebSocket, MCP over HTTP, both with the token.
//   npm install agent-backend
//   AGENTBE_TOKEN=$(cat ~/.agentbe-token) AGENTBE_ROOT=$HOME/workspace node npm-remote.mjs
// AGENTBE_ROOT is the daemon's --root (its /health says rootDir); another root is refused.
import { RemoteFilesystemBackend } from 'agent-backend'

const backend = new RemoteFilesystemBackend({
  rootDir: process.env.AGENTBE_ROOT ?? '/home/you/workspace', // the daemon's --root
  host: process.env.AGENTBE_HOST ?? '127.0.0.1',
  port: Number(process.env.AGENTBE_PORT ?? 3001),
  authToken: process.env.AGENTBE_TOKEN,
})
await backend.write('hello.txt', 'hello from the npm client\n')
console.log(await backend.read('hello.txt'))
console.log(await backend.exec('ls -la'))
await backend.destroy()

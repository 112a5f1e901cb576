// The published npm client's local backend: getMCPClient() spawns
// `agent-backend` from PATH, so with this daemon's binary first on PATH
// (before the npm package's bin) its MCP tools are ours, over stdio.
//   npm install agent-backend
//   PATH=$HOME/.local/bin:$PATH node npm-local.mjs   # after make install PREFIX=$HOME/.local
import { LocalFilesystemBackend } from 'agent-backend'

const backend = new LocalFilesystemBackend({ rootDir: process.env.AGENTBE_ROOT ?? './workspace' })
const mcp = await backend.getMCPClient()
const { tools } = await mcp.listTools()
console.log(tools.map((t) => t.name).join(' '))
await mcp.close()
await backend.destroy()

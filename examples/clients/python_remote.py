"""The agent-backend Python package's remote client against a running daemon.

    pip install agent-backend
    AGENTBE_TOKEN=$(cat ~/.agentbe-token) AGENTBE_ROOT=$HOME/workspace python python_remote.py

The client connects over SSH-over-WebSocket (/ssh) with the static bearer
token; root_dir is the daemon's --root.
"""
import asyncio
import os

from agent_backend import RemoteFilesystemBackend, RemoteFilesystemBackendConfig


async def main() -> None:
    backend = RemoteFilesystemBackend(
        RemoteFilesystemBackendConfig(
            root_dir=os.environ.get("AGENTBE_ROOT", "/home/you/workspace"),
            host=os.environ.get("AGENTBE_HOST", "127.0.0.1"),
            port=int(os.environ.get("AGENTBE_PORT", "3001")),
            auth_token=os.environ["AGENTBE_TOKEN"],
        )
    )
    await backend.write("hello.txt", "hello from Python\n")
    print(await backend.read("hello.txt"))
    print(await backend.exec("ls -la"))
    await backend.destroy()


asyncio.run(main())

"""The host side of a sandbox: where it runs (backend), its control socket and MCP client, the
``Sandbox`` handle, checkpoints, attaching to a running one, and the pool of warm sandboxes."""

"""The tool framework of the sandbox: the tool host and its catalog, the rpc transport, the control channel, the tool errors."""

"""The sandbox's own tools: the workspace tools, the ``python`` tool, and the agent's processes."""

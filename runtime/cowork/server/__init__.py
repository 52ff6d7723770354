"""The in-container server: the tools, their audit log and the control operations, run inside every sandbox."""

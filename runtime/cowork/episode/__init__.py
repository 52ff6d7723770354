"""One episode: the policy and the sandbox turn by turn (run), the user and the world around the
agent (conversation), and what the episode leaves behind (trajectory)."""

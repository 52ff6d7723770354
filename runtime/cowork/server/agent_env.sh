# Sourced by every bash the agent starts (BASH_ENV): make agent processes the kernel's first
# choice when memory runs out, so an agent that fills memory dies before the server does.
# Raising one's own oom_score_adj needs no privilege; children inherit it.
{ echo 1000 > /proc/self/oom_score_adj; } 2>/dev/null

"""What command-pattern normalisation knows of each program: wrappers, flags, long options."""

from __future__ import annotations

# Wrapper -> options that take a separate value (the wrapped command follows the options).
WRAPPERS: dict[str, set[str]] = {
    "command": set(), "builtin": set(), "exec": {"-a"}, "nohup": set(), "setsid": set(), "time": {"-f", "-o"},
    "nice": {"-n"}, "ionice": {"-c", "-n", "-p"}, "chrt": set(), "stdbuf": {"-i", "-o", "-e"},
    "env": {"-u", "-C", "-S"}, "sudo": {"-u", "-g", "-C", "-D", "-h", "-p", "-U"}, "doas": {"-u", "-C"},
    "xargs": {"-a", "-d", "-E", "-e", "-I", "-i", "-L", "-l", "-n", "-P", "-s", "--delimiter", "--max-args",
              "--max-procs", "--arg-file", "--replace", "--max-lines", "--max-chars"},
    "timeout": {"-s", "-k", "--signal", "--kill-after"}, "busybox": set(), "unbuffer": set(),
    "flock": {"-w", "-E", "-c"}, "watch": {"-n", "-d"}, "taskset": set(), "catchsegv": set(), "strace": {"-o", "-e", "-p"},
}
# Wrappers whose first operand is not the command (timeout DURATION, flock FILE, chrt PRIO, taskset MASK).
SKIP_OPERAND = {"timeout": 1, "flock": 1, "chrt": 1, "taskset": 1}
# Programs whose options are not POSIX short flags (find -name, dd if=): left as written.
NO_FLAG_MERGE = {"find", "dd", "test", "[", "[[", "expr", "java", "tar", "ps", "printf", "echo"}
# Per-program synonyms: option -> the canonical short letter.
SYNONYMS: dict[str, dict[str, str]] = {
    "rm": {"-R": "r", "--recursive": "r", "--force": "f", "--dir": "d", "--verbose": "v", "--interactive": "i"},
    "cp": {"-R": "r", "--recursive": "r", "--force": "f", "--archive": "a"},
    "mv": {"--force": "f", "--interactive": "i", "--no-clobber": "n"},
    "rmdir": {"--parents": "p"},
    "grep": {"-R": "r", "--recursive": "r"},
    "chmod": {"--recursive": "R"}, "chown": {"--recursive": "R"}, "chgrp": {"--recursive": "R"},
    "shred": {"--remove": "u", "--zero": "z"},
}
# The long options of the programs that know theirs (GNU coreutils 9): getopt_long accepts any
# unambiguous prefix (``rm --rec``), so a prefix is completed before synonyms are folded. Other
# programs keep their long options as written (find's ``-delete`` takes no abbreviation; grep,
# rsync and git have too many options to list here: write their patterns for prefixes).
_OWNER = ("--preserve-root", "--no-preserve-root", "--verbose", "--help", "--version")
LONG_OPTIONS: dict[str, tuple[str, ...]] = {
    "rm": ("--force", "--interactive", "--one-file-system", "--recursive", "--dir", *_OWNER),
    "cp": ("--archive", "--attributes-only", "--backup", "--copy-contents", "--debug", "--dereference", "--force",
           "--interactive", "--link", "--no-clobber", "--no-dereference", "--preserve", "--no-preserve", "--parents",
           "--recursive", "--reflink", "--remove-destination", "--sparse", "--strip-trailing-slashes", "--suffix",
           "--symbolic-link", "--target-directory", "--no-target-directory", "--update", "--one-file-system",
           "--context", "--keep-directory-symlink", "--verbose", "--help", "--version"),
    "mv": ("--backup", "--debug", "--exchange", "--force", "--interactive", "--no-clobber", "--no-copy",
           "--strip-trailing-slashes", "--suffix", "--target-directory", "--no-target-directory", "--update",
           "--context", "--verbose", "--help", "--version"),
    "rmdir": ("--ignore-fail-on-non-empty", "--parents", "--verbose", "--help", "--version"),
    "chmod": ("--changes", "--silent", "--quiet", "--reference", "--recursive", *_OWNER),
    "chown": ("--changes", "--dereference", "--no-dereference", "--from", "--silent", "--quiet", "--reference",
              "--recursive", *_OWNER),
    "chgrp": ("--changes", "--dereference", "--no-dereference", "--silent", "--quiet", "--reference",
              "--recursive", *_OWNER),
    "shred": ("--force", "--iterations", "--random-source", "--size", "--remove", "--verbose", "--exact", "--zero",
              "--help", "--version"),
    "ln": ("--backup", "--directory", "--force", "--interactive", "--logical", "--no-dereference", "--physical",
           "--relative", "--symbolic", "--suffix", "--target-directory", "--no-target-directory", "--verbose",
           "--help", "--version"),
    "truncate": ("--no-create", "--io-blocks", "--reference", "--size", "--help", "--version"),
}

"""``python -m cowork.integrations.verl TASK... --out FILE``: the task dataset verl reads."""

from .dataset import main

raise SystemExit(main())

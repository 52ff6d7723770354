"""``python -m cowork.cli``: the ``cowork`` command."""

import sys

from . import main

sys.exit(main())

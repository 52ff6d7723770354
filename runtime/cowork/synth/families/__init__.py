"""The built-in task families: importing this package registers each of them.

Each module registers its family (or families) with :func:`cowork.synth.family.family`.
"""

import importlib
import pkgutil

for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")

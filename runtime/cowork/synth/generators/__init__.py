"""The built-in world generators (``cowork.synth.compose``): importing this package registers
each of them. One module per generator or per small group of related generators.
"""

import importlib
import pkgutil

for _mod in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_mod.name}")

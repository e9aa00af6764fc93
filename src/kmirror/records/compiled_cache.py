"""numba's on-disk cache of kmirror's compiled functions, invalidated by their callees too.

numba keys a cached function on the content of its own source file only. A compiled
function that calls compiled functions of another module (the log cleaner calls
`record_scan.scan_section`) has them inlined, with their constants (field indexes), into its
cached machine code: after a change to the callee's module alone, numba would load the
stale code. This locator (numba's in-tree `__pycache__` location) stamps a kmirror
function with the content of its module and of every kmirror module whose compiled
functions that module uses, transitively. Importing this module registers it; the compiled
modules import it (through `record_scan`) before they define their functions.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from types import ModuleType

from numba.core import caching  # type: ignore[import-untyped]
from numba.core.dispatcher import Dispatcher  # type: ignore[import-untyped]

# Recent numba releases name them without the underscore.
_InTree = getattr(caching, "InTreeCacheLocator", None) or getattr(caching, "_InTreeCacheLocator")  # noqa: B009
_Impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl")  # noqa: B009


def compiled_dependencies(module_name: str) -> list[str]:
    """The source files of `module_name` and of the kmirror modules whose compiled
    functions it uses, transitively, sorted."""
    seen: set[str] = set()
    pending = [module_name]
    while pending:
        name = pending.pop()
        module = sys.modules.get(name)
        if name in seen or not isinstance(module, ModuleType):
            continue
        seen.add(name)
        for value in vars(module).values():
            if isinstance(value, Dispatcher) and value.py_func.__module__.startswith("kmirror."):
                pending.append(value.py_func.__module__)
    return sorted(str(getattr(sys.modules[name], "__file__", "")) for name in seen)


class DependencyStampedLocator(_InTree):  # type: ignore[misc,valid-type]
    def __init__(self, py_func: object, py_file: str) -> None:
        super().__init__(py_func, py_file)
        self._module_name: str = py_func.__module__  # type: ignore[attr-defined]

    @classmethod
    def from_function(cls, py_func: object, py_file: str) -> object:
        if not getattr(py_func, "__module__", "").startswith("kmirror."):
            return None
        return super().from_function(py_func, py_file)

    def get_source_stamp(self) -> str:
        digest = hashlib.sha256()
        for path in compiled_dependencies(self._module_name):
            digest.update(path.encode() + b"\0" + Path(path).read_bytes())
        return digest.hexdigest()


if DependencyStampedLocator not in _Impl._locator_classes:
    _Impl._locator_classes.insert(0, DependencyStampedLocator)

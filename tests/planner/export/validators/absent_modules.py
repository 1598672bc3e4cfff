"""Empty stand-ins for packages an older release's module imports at load time but its argument parser and the
checks after it never call (OpenRLHF 0.8.9 / 0.10.1: vllm in trainer/ray/vllm_engine.py, flash_attn in models/), for
the old-release venvs of tools/fwenv_old.sh that do not install them. Only a name that is not importable is stood in
for: where the real package is installed (the newest venv, tools/fwenv.sh) it is the one imported."""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types


class _Anything(types.ModuleType):
    """A module whose every attribute is a further stand-in (a class, a function, a constant: never called here)."""

    __path__: tuple = ()  # a package: its submodules are stood in for too

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {"__init__": lambda self, *a, **k: None})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".", 1)[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Anything(spec.name)

    def exec_module(self, module):
        module.__version__ = "0.0.0+absent"


def stand_in(*roots: str) -> list[str]:
    """Serve each of `roots` that is not installed as an empty package; returns the ones stood in for."""
    absent = tuple(r for r in roots if importlib.util.find_spec(r) is None)
    if absent:
        # transformers asks find_spec("flash_attn") once, when modeling_utils loads (utils/import_utils.py
        # is_flash_attn_2_available, cached): loaded first, it sees the package as what it is, absent
        importlib.import_module("transformers.modeling_utils")
        sys.meta_path.append(_Finder(absent))
    return list(absent)

"""--format-module, shared by the commands that pack or replay.

A custom context format exists only in a process that registered it, so from the command
line its name could not pack and its receipts could not replay ("a format not registered
in this process"). This option imports the caller's module, which registers it.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path

from ..errors import ConfigError, RmsError

FLAG = "--format-module"


def add_format_module_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(FLAG, action="append", default=[], metavar="MODULE",
                        help="import MODULE first (a dotted module name, or the path of a .py "
                             "file): it registers custom context formats with "
                             "rms_duck.formats.register_format; repeatable")


def import_format_modules(args: argparse.Namespace) -> list[str]:
    """Import each --format-module once; return the format names they registered."""
    from ..formats import FORMATS

    added: list[str] = []
    seen: set[str] = set()
    for given in getattr(args, "format_module", None) or []:
        if given in seen:
            continue  # named twice: a second import would register its formats again
        seen.add(given)
        before = set(FORMATS)
        fresh = _import(given)
        new = [name for name in FORMATS if name not in before]
        if fresh and not new:
            raise ConfigError(
                f"{FLAG} {given!r} was imported but registered no context format; call "
                "rms_duck.formats.register_format(YourFormat()) at the top level of that "
                "module")
        added += new
    return added


def _import(given: str) -> bool:
    """Import `given`; False when it was imported already in this process."""
    if not isinstance(given, str) or not given.strip():
        raise ConfigError(f"{FLAG} needs a module name or a .py file's path, got {given!r}; "
                          f"pass for example {FLAG} my_formats or {FLAG} ./my_formats.py")
    if given.endswith(".py") or "/" in given or "\\" in given:
        return _import_file(given)
    if given in sys.modules:
        return False
    # As `python -m` would find it: the rms-duck script's own path holds its bin directory,
    # not the current one. Only for this import: a file there must not shadow a module the
    # command imports later.
    here = os.getcwd()
    searched = here not in sys.path and "" not in sys.path
    if searched:
        sys.path.insert(0, here)
    try:
        importlib.import_module(given)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (given == exc.name or given.startswith(exc.name + ".")):
            raise ConfigError(
                f"{FLAG} {given!r}: no module named {exc.name!r} on the Python path (it "
                f"searches the current directory first); run from the directory that holds "
                f"it, add that directory to PYTHONPATH, or pass the .py file's path") from None
        raise _failed(given, exc) from exc
    except RmsError:
        raise  # a format name taken, a format lacking a method: the message says the fix
    except Exception as exc:  # the module's own code failed: say which module, and how
        raise _failed(given, exc) from exc
    finally:
        if searched:
            sys.path.remove(here)
    return True


def _import_file(given: str) -> bool:
    path = Path(given)
    if not path.is_file():
        raise ConfigError(f"{FLAG} {given!r} is not a file; pass the path of a .py file "
                          "that calls rms_duck.formats.register_format, or a module name")
    # One module per file, named by its resolved path, so naming it twice imports it once.
    name = "rms_duck_format_module_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    if name in sys.modules:
        return False
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{FLAG} {given!r} cannot be imported as Python; pass a .py "
                          "file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # Its own directory is searched while it runs, as for `python path/to/file.py`, so it
    # can import the module beside it that defines the format.
    folder = str(path.resolve().parent)
    searched = folder not in sys.path
    if searched:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:
        del sys.modules[name]
        if isinstance(exc, RmsError) or not isinstance(exc, Exception):
            raise
        raise _failed(given, exc) from exc
    finally:
        if searched:
            sys.path.remove(folder)
    return True


def _failed(given: str, exc: Exception) -> ConfigError:
    """The module's own failure, named with the module."""
    return ConfigError(f"{FLAG} {given!r} failed while importing: {type(exc).__name__}: "
                       f"{exc}; fix that module, or leave it out")

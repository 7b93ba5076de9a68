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
from collections.abc import Iterator
from contextlib import contextmanager
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
    for given in getattr(args, "format_module", None) or []:
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
    """Import `given`; False when this process had imported it already."""
    if isinstance(given, str) and (given.endswith(".py") or "/" in given or "\\" in given):
        return _import_file(given)
    if not isinstance(given, str) or not given.strip() or given.startswith("."):
        # ".name" is relative to a package, which a command line has none of.
        raise ConfigError(f"{FLAG} needs a module name or a .py file's path, got {given!r}; "
                          f"pass for example {FLAG} my_formats or {FLAG} ./my_formats.py")
    if given in sys.modules:
        from ..formats import FORMATS

        file = getattr(sys.modules[given], "__file__", None)
        mine = file is not None and str(Path(file).resolve()) in _FILES  # named twice
        if not mine and not any(type(fmt).__module__ == given for fmt in FORMATS.values()):
            raise ConfigError(
                f"{FLAG} {given!r} names a module this process had imported already, and no "
                "registered context format comes from it; name your own module, the one "
                "that calls rms_duck.formats.register_format")
        return False
    # As `python -m` would find it: the rms-duck script's own path holds its bin directory,
    # not the current one.
    with _searching(os.getcwd()):
        origin = _origin(given)
        if origin is not None and origin in _FILES:
            return False  # the same file, named by its path before
        try:
            module = importlib.import_module(given)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (given == exc.name
                                         or given.startswith(exc.name + ".")):
                raise ConfigError(
                    f"{FLAG} {given!r}: no module named {exc.name!r} on the Python path (it "
                    f"searches the current directory too); run from the directory that "
                    f"holds it, add that directory to PYTHONPATH, or pass the .py file's "
                    f"path") from None
            raise _failed(given, exc) from exc
        except RmsError:
            raise  # a format name taken, a format lacking a method: the message says the fix
        except Exception as exc:  # the module's own code failed: say which module, and how
            raise _failed(given, exc) from exc
    file = getattr(module, "__file__", None)
    if file:
        _FILES.add(str(Path(file).resolve()))
    return True


def _import_file(given: str) -> bool:
    path = Path(given)
    if not path.is_file():
        raise ConfigError(f"{FLAG} {given!r} is not a file; pass the path of a .py file "
                          "that calls rms_duck.formats.register_format, or a module name")
    resolved = str(path.resolve())
    if resolved in _FILES:
        return False  # named twice, or by its module name before
    name = "rms_duck_format_module_" + hashlib.sha256(resolved.encode()).hexdigest()[:16]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{FLAG} {given!r} cannot be imported as Python; pass a .py "
                          "file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # Its own folder is searched, as for `python path/to/file.py`, so it can import the
    # module beside it that defines the format.
    with _searching(str(path.resolve().parent)):
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:
            del sys.modules[name]
            if isinstance(exc, RmsError) or not isinstance(exc, Exception):
                raise
            raise _failed(given, exc) from exc
    _FILES.add(resolved)
    return True


# The files --format-module imported in this process, resolved: one file named twice, by
# its path and by its module name, is imported (and its formats registered) once.
_FILES: set[str] = set()


@contextmanager
def _searching(folder: str) -> Iterator[None]:
    """`folder` first on the Python path while the module is imported, then last for the
    rest of the command: a format may import a sibling module later (inside record_line),
    and at the end of the path the folder shadows no module installed or built in."""
    present = folder in sys.path or (folder == os.getcwd() and "" in sys.path)
    if present:
        yield
        return
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.path.remove(folder)
        sys.path.append(folder)


def _origin(name: str) -> str | None:
    """The resolved file a module name would import from, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None  # import_module reports it
    origin = getattr(spec, "origin", None)
    return str(Path(origin).resolve()) if origin and os.path.isfile(origin) else None


def _failed(given: str, exc: Exception) -> ConfigError:
    """The module's own failure, named with the module."""
    return ConfigError(f"{FLAG} {given!r} failed while importing: {type(exc).__name__}: "
                       f"{exc}; fix that module, or leave it out")

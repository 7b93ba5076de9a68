"""Registry of context formats: reader (default), auditable and compact."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError, did_you_mean
from .auditable import AuditableFormat
from .base import BaseFormat, Format, RecordView
from .compact import CompactFormat
from .legacy import (
    CompactV1Format,
    CompactV5Format,
    ReaderV1Format,
    ReaderV2Format,
    ReaderV3Format,
    ReaderV5Format,
    ReaderV6Format,
    ReaderV7Format,
    ReaderV8Format,
)
from .reader import ReaderFormat

FORMATS: dict[str, Format] = {}


# What the packer reads from a format without a default (Format in base.py); date_lines,
# date_order and elides_lone_times are optional.
_REQUIRED_METHODS = ("header", "record_line", "section_label", "shows_speaker", "metadata_line")
_REQUIRED_MEMBERS = ("text_levels_only", "numbers_records", "supports_citations",
                     "folds_repeated_text", "date_word", "labels_conflicts")


def register_format(fmt: Format) -> None:
    """Add a format under fmt.name; a taken name raises, and so does a frozen format's (any
    name with '@'): get_format asks FORMATS first, so the new format would replay older
    receipts in place of the frozen one, with other bytes."""
    if isinstance(fmt, type) or isinstance(fmt, str):
        # A class (register_format(PlainFormat)) was taken, and every pack with it then
        # failed: "PlainFormat.record_line() missing 1 required positional argument".
        given = f"the class {fmt.__name__}" if isinstance(fmt, type) else f"the text {fmt!r}"
        example = fmt.__name__ if isinstance(fmt, type) else "PlainFormat"
        raise ConfigError(f"register_format takes a format object, got {given}; pass an "
                          f"instance: register_format({example}())")
    name = getattr(fmt, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"a context format needs a name, got {name!r}; set for example "
                          "name = 'plain' on its class")
    missing = [member for member in _REQUIRED_MEMBERS if not hasattr(fmt, member)]
    missing += [member for member in _REQUIRED_METHODS if not callable(getattr(fmt, member, None))]
    if missing:
        raise ConfigError(
            f"context format {name!r} ({type(fmt).__name__}) lacks {', '.join(missing)}; "
            "subclass rms_duck.formats.BaseFormat, which supplies all but header() and "
            "record_line(), and write those")
    if name in FORMATS:
        raise ConfigError(f"a context format named {name!r} is already registered; give "
                          f"yours another name (taken: {', '.join(FORMATS)})")
    if "@" in name:
        raise ConfigError(f"context format name {name!r} has an '@', which marks the frozen "
                          "formats older receipts replay with (such as 'reader@5'); choose a "
                          "name without one")
    FORMATS[name] = fmt


# Frozen formats that only replays of older receipts use (formats/legacy.py); they are not
# offered for new packs, so they stay out of FORMATS and its listings.
LEGACY_FORMATS: dict[str, Format] = {
    f.name: f for f in (ReaderV1Format(), CompactV1Format(), ReaderV2Format(),
                        ReaderV3Format(), ReaderV5Format(), CompactV5Format(),
                        ReaderV6Format(), ReaderV7Format(), ReaderV8Format())}


def frozen_name(name: str, frozen: dict[str, str]) -> str:
    """The format an older receipt packed with `name` replays with: the frozen copy of a
    built-in format (formats/legacy.py), or, for a registered subclass of ReaderFormat or
    CompactFormat, a copy of it whose inherited methods are the frozen format's, so it still
    renders the bytes that receipt recorded. Any other name as it is."""
    if name in frozen:
        return frozen[name]
    fmt = FORMATS.get(name)
    builtin = next((cls for cls in _FROZEN_BASES if isinstance(fmt, cls)), None)
    if builtin is None or type(fmt) is builtin or builtin.name not in frozen:
        return name
    old = type(LEGACY_FORMATS[frozen[builtin.name]])
    if not issubclass(old, builtin):
        return name  # reader@1 had other record lines too: no copy renders its bytes
    copy_name = f"{name}@{frozen[builtin.name]}"
    if copy_name not in LEGACY_FORMATS:
        try:
            LEGACY_FORMATS[copy_name] = _frozen_copy(fmt, old, copy_name)
        except Exception as exc:  # a subclass may refuse to be subclassed or copied
            raise ConfigError(
                f"context format {name!r} cannot be rebuilt as it was at receipt version "
                f"{frozen[builtin.name]!r} to replay an older receipt: making a copy of it "
                f"over {old.__name__} failed ({type(exc).__name__}: {exc}); let its class be "
                "subclassed without arguments and its instance be copied field by field, or "
                "replay the receipt with the release that wrote it") from None
    return copy_name


def _frozen_copy(fmt: Any, old: type, copy_name: str) -> Any:
    """`fmt` as an instance of a new class that puts the frozen `old` between fmt's class
    and its built-in base in the method order: what the subclass inherited, and what its
    own methods reach through super(), is then what the frozen format had (date lines and
    flags included). The instance's state is copied field by field, past any __copy__,
    __setattr__ or frozen dataclass of the subclass."""
    registered = dict(FORMATS)
    try:
        cls: Any = type(type(fmt).__name__, (type(fmt), old), {})
    finally:
        changed = FORMATS != registered
        if changed:  # its __init_subclass__ registered a format: undo that
            FORMATS.clear()
            FORMATS.update(registered)
    if changed:
        raise TypeError("its class registers a format whenever it is subclassed")
    cls.name = copy_name  # set after the class exists: __init_subclass__ saw the old name
    frozen_fmt: Any = object.__new__(cls)
    # object.__getstate__ (Python 3.11+) gives the instance dict and every slot by its
    # stored name (a string __slots__, a private __x), whatever the subclass's own
    # __getstate__, __copy__ or __setattr__ do.
    state = object.__getstate__(fmt)
    attrs, slots = state if isinstance(state, tuple) else (state, None)
    for key, value in {**(attrs or {}), **(slots or {})}.items():
        object.__setattr__(frozen_fmt, key, value)
    if "name" in getattr(frozen_fmt, "__dict__", {}):
        object.__setattr__(frozen_fmt, "name", copy_name)
    return frozen_fmt


# The built-in formats a registered subclass may inherit from whose bytes a receipt
# version changed.
_FROZEN_BASES = (ReaderFormat, CompactFormat)


def get_format(name: str) -> Format:
    try:
        return FORMATS[name] if name in FORMATS else LEGACY_FORMATS[name]
    except KeyError:
        raise ConfigError(
            f"unknown context format {name!r}.{did_you_mean(name, FORMATS)} "
            f"Known formats: {', '.join(FORMATS)}"
        ) from None


for _builtin in (ReaderFormat(), AuditableFormat(), CompactFormat()):
    register_format(_builtin)

__all__ = ["FORMATS", "LEGACY_FORMATS", "BaseFormat", "Format", "RecordView", "frozen_name",
           "get_format", "register_format"]


def __getattr__(name: str) -> Any:
    """Submodules load on first use (rms_duck._submodule)."""
    import rms_duck

    return rms_duck._submodule(__name__, name)

"""Registry of context formats: reader (default), auditable and compact."""

from __future__ import annotations

from ..errors import ConfigError, did_you_mean
from .auditable import AuditableFormat
from .base import BaseFormat, Format, RecordView
from .compact import CompactFormat
from .legacy import CompactV1Format, ReaderV1Format, ReaderV2Format, ReaderV3Format
from .reader import ReaderFormat

FORMATS: dict[str, Format] = {}


def register_format(fmt: Format) -> None:
    """Add a format under fmt.name; a taken name raises."""
    if fmt.name in FORMATS:
        raise ConfigError(f"a context format named {fmt.name!r} is already registered")
    FORMATS[fmt.name] = fmt


# Frozen formats that only replays of older receipts use (formats/legacy.py); they are not
# offered for new packs, so they stay out of FORMATS and its listings.
LEGACY_FORMATS: dict[str, Format] = {
    f.name: f for f in (ReaderV1Format(), CompactV1Format(), ReaderV2Format(),
                        ReaderV3Format())}


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

__all__ = ["FORMATS", "LEGACY_FORMATS", "BaseFormat", "Format", "RecordView", "get_format",
           "register_format"]

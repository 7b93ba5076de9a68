"""Timestamps: parse, normalise to UTC, and print the same bytes for equal instants.

Aware values are converted to UTC before printing; naive values stay nominal (printed
without an offset) because attaching the host's zone would invent information.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from .errors import ConfigError


def as_utc(value: datetime) -> datetime:
    """Aware -> the same instant in UTC (plain timezone.utc); naive -> unchanged."""
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=None)
    return value.astimezone(UTC)


def iso(value: datetime | None) -> str | None:
    """ISO-8601 text: '2023-05-28T18:12:00+00:00' for aware values, no offset for naive."""
    if value is None:
        return None
    return as_utc(value).isoformat()


def reader_label(value: datetime) -> str:
    """'YYYY-MM-DD', or 'YYYY-MM-DD HH:MM[:SS]' when the time of day is not midnight."""
    v = as_utc(value)
    day = f"{v.year:04d}-{v.month:02d}-{v.day:02d}"
    if v.second or v.microsecond:
        return f"{day} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
    if v.hour or v.minute:
        return f"{day} {v.hour:02d}:{v.minute:02d}"
    return day


def parse_instant(field: str, value: object) -> datetime:
    """Accept a datetime, a date, or ISO-8601 text; raise ConfigError naming the field."""
    parsed = _parse_instant(field, value)
    try:
        as_utc(parsed)  # printed in UTC later: '0001-01-01T00:00:00+05:00' cannot be
    except OverflowError:
        raise ConfigError(
            f"config field {field!r} must be a time whose UTC instant falls in years 1 to "
            f"9999, got {value!r}; pass a time at least a day inside that range") from None
    return parsed


def _parse_instant(field: str, value: object) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass
    raise ConfigError(
        f"config field {field!r} must be an ISO-8601 timestamp such as "
        f"'2026-09-14T00:00:00+00:00', got {value!r}"
    )

"""PackingConfig: every knob of a pack, validated, with a canonical dict form for receipts."""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from typing import Any

from .errors import ConfigError, did_you_mean
from .formats import FORMATS, LEGACY_FORMATS, Format, get_format
from .records import Level
from .timefmt import iso, parse_instant

ORDERINGS = ("balanced", "score", "density")
POLICIES = ("highest_fit", "budget_fraction")
GUIDANCE_MODES = ("off", "temporal", "all")
SESSION_MODES = ("trigger_tier", "adjacent")


@dataclass(frozen=True, slots=True, kw_only=True)
class PackingConfig:
    """Packing settings; field names are the keys of pack_context's JSON config."""

    context_format: str = "reader"
    multipath_ordering: str = "balanced"
    representation_policy: str = "highest_fit"
    overhead_tokens: int = 100
    # None: the model's encoding when `model` is set, else DEFAULT_ENCODING (o200k_base).
    encoding: str = None  # type: ignore[assignment]  # a str once __post_init__ has run
    model: str | None = None
    min_fidelity: str = "reference"
    context_citations: bool = False
    context_guidance_mode: str = "temporal"
    fold_repeated_text: bool = True
    session_context_packing: str | None = None
    session_window: int = 3
    query: str | None = None
    reference_time: datetime | None = None
    fact_min_confidence: float = 0.7
    # Candidates scoring below this are excluded (BELOW_MIN_SCORE); pins and active tasks
    # are kept whatever their score, as RFC-0005 retrieves them whatever the query.
    min_score: float = 0.0

    def __post_init__(self) -> None:
        # Only text is looked up among the frozen formats: a list or dict from a JSON
        # config is unhashable, and the dict lookup would raise a bare TypeError.
        if not isinstance(self.context_format, str) or self.context_format not in LEGACY_FORMATS:
            _choice("context_format", self.context_format, tuple(FORMATS))
        _choice("multipath_ordering", self.multipath_ordering, ORDERINGS)
        _choice("representation_policy", self.representation_policy, POLICIES)
        _choice("min_fidelity", self.min_fidelity, tuple(level.value for level in Level))
        _choice("context_guidance_mode", self.context_guidance_mode, GUIDANCE_MODES)
        if self.session_context_packing is not None:
            _choice("session_context_packing", self.session_context_packing, SESSION_MODES)
        for name in ("context_citations", "fold_repeated_text"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(
                    f"config field {name!r} must be true or false, got {getattr(self, name)!r}; "
                    "pass a boolean (JSON true or false, not a string or a number)"
                )
        if (
            not isinstance(self.overhead_tokens, int)
            or isinstance(self.overhead_tokens, bool)
            or self.overhead_tokens < 0
        ):
            raise ConfigError(
                f"config field 'overhead_tokens' must be a whole number of tokens >= 0, "
                f"got {self.overhead_tokens!r}; use 0 to reserve nothing"
            )
        if (not isinstance(self.session_window, int) or isinstance(self.session_window, bool)
                or self.session_window < 0):
            raise ConfigError(
                f"config field 'session_window' must be a whole number of turns >= 0, "
                f"got {self.session_window!r}; the default is 3"
            )
        _resolve_encoding(self)
        if self.reference_time is not None:
            # The same values a dict or JSON config takes (ISO text, a date), checked here:
            # PackingConfig(reference_time="2026-09-14") failed later, at the pack, with a
            # bare AttributeError ('str' object has no attribute 'tzinfo').
            object.__setattr__(self, "reference_time",
                               parse_instant("reference_time", self.reference_time))
        for name in ("fact_min_confidence", "min_score"):
            _unit_interval(name, getattr(self, name))
        if self.query is not None and not isinstance(self.query, str):
            raise ConfigError(f"config field 'query' must be text, got {self.query!r}; pass "
                              "the question as a string, e.g. 'When is the cut-over?'")
        if self.context_citations and not self.format.supports_citations:
            citing = [name for name, fmt in FORMATS.items() if fmt.supports_citations]
            raise ConfigError(
                "config field 'context_citations' applies only to context_format "
                f"{' or '.join(map(repr, citing))}, got context_format {self.context_format!r}; "
                f"drop context_citations or use {citing[0] if citing else 'another format'}"
            )

    @property
    def format(self) -> Format:
        """The registered format this config names."""
        return get_format(self.context_format)

    @property
    def numbered(self) -> bool:
        """Whether record lines carry local refs (m1, m2, ...): citations or the format's own."""
        return self.context_citations or self.format.numbers_records

    @property
    def min_level(self) -> Level:
        return Level(self.min_fidelity)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values, every field present: what a receipt records.

        Fields added after receipt_version 1 appear only when set, so a receipt that does
        not use them keeps its version-1 bytes (a missing field replays as its default).
        """
        out = asdict(self)
        # In UTC, so equal instants give equal receipts whatever the caller's offset.
        out["reference_time"] = iso(self.reference_time)
        for name, default in _ADDED_AFTER_V1.items():
            if out[name] == default:
                del out[name]
        return out

    def with_changes(self, **changes: Any) -> PackingConfig:
        return replace(self, **changes)


FIELD_NAMES = tuple(f.name for f in fields(PackingConfig))
_ADDED_AFTER_V1 = {"min_score": 0.0}


def _unknown_field(key: str) -> ConfigError:
    return ConfigError(f"unknown config field {key!r}.{did_you_mean(key, FIELD_NAMES)} "
                       f"Known fields: {', '.join(FIELD_NAMES)}")


def _checked_init(init: Any) -> Any:
    """PackingConfig's __init__, refusing an unknown keyword as a dict config does: Python's
    own "__init__() got an unexpected keyword argument 'context_fromat'" named no fix."""
    @functools.wraps(init)
    def __init__(self: PackingConfig, *args: Any, **kwargs: Any) -> None:
        unknown = sorted(key for key in kwargs if key not in FIELD_NAMES)
        if unknown:
            raise _unknown_field(unknown[0])
        init(self, *args, **kwargs)
    return __init__


setattr(PackingConfig, "__init__", _checked_init(PackingConfig.__init__))  # noqa: B010


def check_flag(name: str, value: object, fix: str) -> None:
    """A True/False argument of the API (store, inputs, full, ...) must be a bool: a text
    such as store="no" read as true, and stored what the caller meant to keep out."""
    if type(value) is not bool:
        raise ConfigError(f"{name} must be True or False, got {value!r}; {fix}")


def _resolve_encoding(config: PackingConfig) -> None:
    """Fill `encoding` from `model` (as tiktoken.encoding_for_model does) or the default;
    a model and an encoding that disagree are an error, never a silent choice."""
    from .tokens.encodings import DEFAULT_ENCODING
    from .tokens.models import encoding_for_model

    encoding: str | None = config.encoding
    if encoding is not None and (not isinstance(encoding, str) or not encoding):
        raise ConfigError(
            f"config field 'encoding' must name an encoding such as {DEFAULT_ENCODING!r} or "
            f"'cl100k_base', got {encoding!r}"
        )
    if config.model is None:
        object.__setattr__(config, "encoding", encoding or DEFAULT_ENCODING)
        return
    implied = encoding_for_model(config.model)
    if encoding is not None and encoding != implied:
        raise ConfigError(
            f"config fields 'model' and 'encoding' disagree: model {config.model!r} uses "
            f"encoding {implied!r}, but encoding is {encoding!r}; give only one of them"
        )
    object.__setattr__(config, "encoding", implied)


_DEFAULT_CONFIG: list[PackingConfig] = []


def _default_config() -> PackingConfig:
    """One shared default config (it is frozen): building and validating it again for every
    pack cost more than some small packs, and the receipt's config text is remembered per
    config object, so a shared one is written once."""
    if not _DEFAULT_CONFIG:
        _DEFAULT_CONFIG.append(PackingConfig())
    return _DEFAULT_CONFIG[0]


def parse_config(value: object) -> PackingConfig:
    """Build a PackingConfig from None, a PackingConfig, a dict, or JSON text.

    Raises:
        ConfigError: malformed JSON, an unknown key or an invalid value.
    """
    if value is None:
        return _default_config()
    if isinstance(value, PackingConfig):
        return value
    if isinstance(value, (str, bytes)):
        value = _load_json(value)
    if not isinstance(value, dict):
        raise ConfigError(
            f"config must be a JSON object of PackingConfig fields, got {value!r}; "
            'for example \'{"context_format": "auditable"}\''
        )
    unknown = [key for key in value if key not in FIELD_NAMES]
    if unknown:
        raise _unknown_field(sorted(unknown)[0])
    values = {key: val for key, val in value.items() if val is not None}
    if "reference_time" in values:
        values["reference_time"] = parse_instant("reference_time", values["reference_time"])
    if isinstance(values.get("overhead_tokens"), float) and values["overhead_tokens"].is_integer():
        values["overhead_tokens"] = int(values["overhead_tokens"])
    return PackingConfig(**values)


def _load_json(text: str | bytes) -> object:
    try:
        parsed = json.loads(text)
    except RecursionError:
        raise ConfigError(
            f"config is nested too deeply to read: {_clip(text)!r}; pass a flat JSON object "
            'of PackingConfig fields such as \'{"context_format": "auditable"}\'') from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"config is not valid JSON ({exc.msg} at position {exc.pos}): {_clip(text)!r}; "
            'pass an object such as \'{"context_format": "auditable"}\''
        ) from None
    except UnicodeDecodeError as exc:  # bytes only; json.loads decodes them first
        raise ConfigError(
            f"config bytes are not UTF-8 ({exc.reason} at byte {exc.start}): {_clip(text)!r}; "
            "pass the JSON as UTF-8 bytes or as str"
        ) from None
    # A VARCHAR passed through to_json() arrives JSON-quoted once more.
    if isinstance(parsed, str):
        return _load_json(parsed)
    return parsed


def _unit_interval(name: str, value: object) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not (
        math.isfinite(value) and 0.0 <= value <= 1.0
    ):
        default = next(f.default for f in fields(PackingConfig) if f.name == name)
        raise ConfigError(f"config field {name!r} must be a number in [0, 1], got {value!r}; "
                          f"the default is {default!r}")


def _choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(
            f"config field {name!r} has unknown value {value!r}.{did_you_mean(value, choices)} "
            f"Use one of: {', '.join(choices)}"
        )


def _clip(text: str | bytes, limit: int = 80) -> str | bytes:
    if len(text) <= limit:
        return text
    return text[:limit] + b"..." if isinstance(text, bytes) else text[:limit] + "..."

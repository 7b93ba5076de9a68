"""Model name -> encoding name, as tiktoken.encoding_for_model() resolves it.

tiktoken.model's tables are plain dicts (exact names, then prefixes such as "gpt-4o-"), so
resolving a name needs no file and no network; loading the encoding is a separate step.
"""

from __future__ import annotations

from ..errors import ConfigError, did_you_mean


def encoding_for_model(model: str) -> str:
    """The encoding name tiktoken uses for `model`.

    >>> encoding_for_model("gpt-4o")
    'o200k_base'
    >>> encoding_for_model("gpt-4")
    'cl100k_base'

    Raises:
        ConfigError: tiktoken does not know the model.
    """
    from tiktoken import model as tables

    if not isinstance(model, str) or not model:
        raise ConfigError(f"config field 'model' must name a model such as 'gpt-4o', got "
                          f"{model!r}")
    try:
        return tables.encoding_name_for_model(model)
    except KeyError:
        names = known_models()
        raise ConfigError(
            f"config field 'model' has unknown value {model!r}.{did_you_mean(model, names)} "
            "tiktoken maps these names and prefixes: "
            f"{', '.join(names)}; or set 'encoding' instead of 'model'") from None


def known_models() -> list[str]:
    """Every exact model name and prefix (ending in '-' or ':') tiktoken maps."""
    from tiktoken import model as tables

    return sorted({*tables.MODEL_TO_ENCODING, *tables.MODEL_PREFIX_TO_ENCODING})

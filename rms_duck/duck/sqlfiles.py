"""Read the package's .sql files, from an editable checkout or an installed wheel alike."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def read_sql(name: str) -> str:
    """Text of sql/<name> (installed as the rms_duck.sql package)."""
    try:
        return resources.files("rms_duck.sql").joinpath(name).read_text(encoding="utf-8")
    except ModuleNotFoundError:
        # Running from a source checkout that is on sys.path but not installed.
        return (Path(__file__).resolve().parents[2] / "sql" / name).read_text(encoding="utf-8")

"""rms_duck: LLM context packed from agent memory, ranked in SQL, cut exactly to a token budget.

The exports resolve lazily (PEP 562), so `import rms_duck` and `rms_duck.pack_candidates`
load neither duckdb nor sqlglot; the DuckDB-facing names load the adapter on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

# public name -> module that defines it
_EXPORTS = {
    "MemoryBundle": "rms_duck.bundle",
    "PackingConfig": "rms_duck.config",
    "RmsError": "rms_duck.errors",
    "count_tokens": "rms_duck.tokens.counter",
    "register_bpe_file": "rms_duck.tokens.encodings",
    "register_tokenizer_file": "rms_duck.tokens.encodings",
    "available_encodings": "rms_duck.tokens.encodings",
    "encoding_for_model": "rms_duck.tokens.models",
    "pack_candidates": "rms_duck.packing.pipeline",
    "pack_batches": "rms_duck.packing.batches",
    "LineCosts": "rms_duck.tokens.costfile",
    "connect": "rms_duck.duck.connection",
    "register": "rms_duck.duck.connection",
    "pack": "rms_duck.duck.api",
    "refresh_index": "rms_duck.duck.ranking",
    "refresh_line_costs": "rms_duck.duck.linecosts",
    "export_line_costs": "rms_duck.duck.linecosts",
    "store_batches": "rms_duck.duck.batchstore",
    "refresh_token_estimates": "rms_duck.duck.organiser",
    "replay": "rms_duck.audit.replay",
    "verify_receipts": "rms_duck.audit.verify",
    "export_heads": "rms_duck.audit.heads",
    "read_heads": "rms_duck.audit.heads",
    "write_heads": "rms_duck.audit.heads",
    "check_line_costs": "rms_duck.audit.linecheck",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:
    from .audit.heads import export_heads as export_heads
    from .audit.heads import read_heads as read_heads
    from .audit.heads import write_heads as write_heads
    from .audit.linecheck import check_line_costs as check_line_costs
    from .audit.replay import replay as replay
    from .audit.verify import verify_receipts as verify_receipts
    from .bundle import MemoryBundle as MemoryBundle
    from .config import PackingConfig as PackingConfig
    from .duck.api import pack as pack
    from .duck.batchstore import store_batches as store_batches
    from .duck.connection import connect as connect
    from .duck.connection import register as register
    from .duck.linecosts import export_line_costs as export_line_costs
    from .duck.linecosts import refresh_line_costs as refresh_line_costs
    from .duck.organiser import refresh_token_estimates as refresh_token_estimates
    from .duck.ranking import refresh_index as refresh_index
    from .errors import RmsError as RmsError
    from .packing.batches import pack_batches as pack_batches
    from .packing.pipeline import pack_candidates as pack_candidates
    from .tokens.costfile import LineCosts as LineCosts
    from .tokens.counter import count_tokens as count_tokens
    from .tokens.encodings import available_encodings as available_encodings
    from .tokens.encodings import register_bpe_file as register_bpe_file
    from .tokens.encodings import register_tokenizer_file as register_tokenizer_file
    from .tokens.models import encoding_for_model as encoding_for_model


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        return _submodule(__name__, name)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # resolve once
    return value


def _submodule(package: str, name: str) -> Any:
    """A package's submodule `name`, imported on first use, so the dotted names the docs
    give (rms_duck.audit.explain.explain, rms_duck.duck.ranking.RankingWeights) work after a
    plain `import rms_duck`; AttributeError for any other name, as for a plain module."""
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise  # the submodule exists and an import inside it failed
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

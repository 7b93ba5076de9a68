"""Multilingual dialogue for the speed bench (`rms-duck bench --text dialogue`).

The issue's figures came from real multi-session dialogue in several languages, where the
default notes rows (workload.py) are invented English-like words. These rows are turns of
two-speaker sessions in the 16 languages and 10 scripts of the seed sentences shipped in
rms_duck/data/bench_texts.json: a session keeps one language and two speakers who take
turns minutes apart, and a turn is three to five different sentences of its language,
joined as the language writes them (Chinese and Japanese without spaces). With about ten
sentences a language, shorter turns would repeat word for word across thousands of rows
(a quarter of 10,000 two-to-four-sentence turns did), which real dialogue rarely does;
these repeat about one in fifteen. Seeded and offline, like the notes rows.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from ..records import Candidate
from .corpus import join_sentences, seed_texts

SPEAKERS = ("Alice", "Bob", "Maya", "Chen Wei", "Olga", "Yusuf", "Priya", "Kenji", "Sofía",
            "Noam", "Linh", "Kasia")
_EPOCH = datetime(2023, 1, 1, tzinfo=UTC)


def dialogue_rows(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """n candidate rows as SQL would pass them (every field present, most of them NULL),
    each a turn: content, speaker and event_time set, ids random, scores uniform."""
    rng = random.Random(seed)
    languages = sorted((language, entry["sentences"]) for language, entry in seed_texts().items())
    fields = Candidate.__slots__
    rows: list[dict[str, Any]] = []
    while len(rows) < n:
        language, sentences = rng.choice(languages)
        pair = rng.sample(SPEAKERS, 2)
        when = _EPOCH + timedelta(minutes=rng.randint(0, 800_000))
        for turn in range(min(rng.randint(4, 20), n - len(rows))):
            when += timedelta(minutes=rng.randint(1, 30))
            row = dict.fromkeys(fields)
            row.update(
                id=str(uuid.UUID(int=rng.getrandbits(128))),
                score=round(rng.random(), 6),
                content=join_sentences(language, rng.sample(sentences, min(rng.randint(3, 5),
                                                                  len(sentences)))),
                type="note",
                paths=["VECTOR", "LEXICAL"] if rng.random() < 0.3 else [rng.choice(("VECTOR",
                                                                                 "LEXICAL"))],
                event_time=when,
                speaker=pair[turn % 2],
            )
            rows.append(row)
    return rows

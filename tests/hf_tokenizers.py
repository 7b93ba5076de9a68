"""Small BPE tokenizers trained here, with Hugging Face `tokenizers`, on local text only.

The training text is the source of a few standard-library modules plus rendered-context-like
lines, so the vocabulary has merges for JSON, list markers and prose; it does not change
when the repository does. Nothing is downloaded.

- "additive": a ByteLevel pre-tokenizer (GPT-2's regex), which cuts at every line break.
- "joined": ByteLevel without its regex, so one piece is the whole text and merges can
  cross line breaks ("}\\n-" and the like): not line-additive, the packer's safe path.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import inspect
import json
import textwrap
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers


def training_texts() -> list[str]:
    texts = [inspect.getsource(m) for m in (json, textwrap, difflib, argparse)]
    lines = [f'- {{"id": "n{i}", "text": "note {i} about the Heron migration"}}'
             for i in range(200)]
    texts.append("\n".join(lines) + "\n")
    texts.append("".join(f"- [m{i}] Maya moved to Lisbon in 202{i % 10}.\n" for i in range(200)))
    texts.append("".join(f'- "note {i} about the Heron migration"\n' for i in range(300)))
    return texts


def train(kind: str) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                       use_regex=kind == "additive")
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"])
    texts = training_texts()
    if kind != "additive":
        # One piece per training text here, and BPE training is quadratic in piece length:
        # train on a few lines at a time (merges still cross the line breaks inside).
        lines = [line for text in texts for line in text.splitlines(keepends=True)]
        texts = ["".join(lines[i:i + 4]) for i in range(0, len(lines), 4)]
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def save(kind: str, folder: Path) -> tuple[Path, str]:
    """Train, save as tokenizer.json under `folder`, return (path, sha256)."""
    path = folder / f"{kind}-tokenizer.json"
    train(kind).save(str(path))
    return path, hashlib.sha256(path.read_bytes()).hexdigest()

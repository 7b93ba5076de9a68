"""MemoryBundle in a notebook: a short repr, and a rich display with the context escaped.

The ecosystem review measured a 284,763-character one-line repr for a 1,000-candidate,
32K-token bundle.
"""

from __future__ import annotations

import html

import rms_duck

from .conftest import rows


def test_repr_of_a_large_bundle_is_one_short_line():
    bundle = rms_duck.pack_candidates(rows(1000, text="memory record {i} " + "word " * 30),
                                      budget=32_000)
    text = repr(bundle)
    assert len(text) < 200 and "\n" not in text
    assert text.startswith(f"<MemoryBundle {bundle.tokens_used}/32000 tokens, "
                           f"{len(bundle.included)} packed, {len(bundle.excluded)} excluded")


def test_markdown_display_summarises_then_shows_the_context_in_an_unbreakable_fence():
    hostile = "```\n# Heading\n<script>alert(1)</script> ````` end"
    bundle = rms_duck.pack_candidates(
        [{"id": "a", "score": 0.9, "content": hostile},
         {"id": "b", "score": 0.8, "content": "x " * 2000}], budget=300)
    md = bundle._repr_markdown_()
    summary, _, body = md.partition("\n\n" + "`" * 6 + "text\n")
    assert "tokens used: " in summary and "records packed: 1" in summary
    assert "excluded: 1 BUDGET\\_EXHAUSTED" in summary
    assert body == bundle.context + "`" * 6 + "\n"  # a longer fence than any run inside


def test_html_display_escapes_the_context():
    bundle = rms_duck.pack_candidates(
        [{"id": "a", "score": 0.9, "content": "<script>alert(1)</script> & more"}], budget=300)
    page = bundle._repr_html_()
    assert "<script>" not in page and html.escape(bundle.context) in page
    assert "<li>flags: none</li>" in page


def test_an_empty_bundle_shows_its_warning():
    bundle = rms_duck.pack_candidates([], budget=300)
    assert "NO_CANDIDATES" in repr(bundle)
    assert "warning: no candidates were given" in bundle._repr_html_()

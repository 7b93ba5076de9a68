"""Snowball stemming and per-language stop words for the lexical index (PyStemmer).

The index stores word stems, so "adopted", "adopting" and "adopt" meet; rms_stem() (SQL,
sql/ranking.sql) calls stem_udf below on both the indexed words and the query's words.
The language is one per database (rms_lexical_config); "none" indexes words as they are.
"""

from __future__ import annotations

import functools

from ..errors import ConfigError, did_you_mean

NO_STEMMING = "none"
DEFAULT_LANGUAGE = "english"
# The English list that sql/schema.sql seeds rms_stopwords with (tests/test_stemming.py
# checks that the two agree).
ENGLISH_STOPWORDS = frozenset((
    "a,about,after,again,all,am,an,and,any,are,as,at,be,been,before,being,but,by,can,could,"
    "did,do,does,doing,for,from,had,has,have,having,he,her,here,hers,him,his,how,i,if,in,"
    "into,is,it,its,just,me,my,no,nor,not,of,on,or,our,ours,she,should,so,some,such,than,"
    "that,the,their,theirs,them,then,there,these,they,this,those,to,too,very,was,we,were,"
    "what,when,where,which,while,who,whom,why,will,with,would,you,your,yours").split(","))


@functools.cache
def languages() -> tuple[str, ...]:
    """The languages rms_stem() knows: PyStemmer's Snowball algorithms, plus "none"."""
    import Stemmer

    return (*sorted(Stemmer.algorithms()), NO_STEMMING)


def check_language(language: object) -> str:
    """The language, lower-cased, or a ConfigError naming the value and the choices."""
    name = language.strip().lower() if isinstance(language, str) else language
    if name not in languages():
        raise ConfigError(f"index language must be a Snowball stemmer name such as 'english' "
                          f"or 'german', or 'none' for no stemming; got {language!r}."
                          f"{did_you_mean(name, languages())}")
    return str(name)


@functools.cache
def _stemmer(language: str):
    import Stemmer

    return Stemmer.Stemmer(language)


def stem_words(words: list[str | None], language: str) -> list[str | None]:
    """The stem of each word (NULL stays NULL), with the language's Snowball stemmer."""
    if language == NO_STEMMING:
        return list(words)
    stem = _stemmer(check_language(language)).stemWord
    return [None if w is None else stem(w) for w in words]


def stopwords_for(language: str) -> list[str]:
    """The stop words shipped for a language: the schema's English list for "english"; for
    the others the `stop-words` package's list (pip install stop-words)."""
    language = check_language(language)
    if language in (DEFAULT_LANGUAGE, NO_STEMMING, "porter"):
        return sorted(ENGLISH_STOPWORDS)
    try:
        from stop_words import get_stop_words
    except ImportError:
        raise ConfigError(f"no stop word list for {language!r} is installed: pip install "
                          "stop-words, or pass stopwords=[...] yourself") from None
    try:
        return sorted({w.lower() for w in get_stop_words(language)})
    except Exception:  # the package raises its own StopWordError for unknown languages
        raise ConfigError(f"the stop-words package has no list for {language!r}; pass "
                          "stopwords=[...] yourself (an empty list keeps every word)") from None

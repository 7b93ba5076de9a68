"""The one digest the project uses: sha256 of text's UTF-8 bytes, as hex."""

from __future__ import annotations

import hashlib

from .escape import utf8


def sha256_text(text: str) -> str:
    """Hex sha256 of the UTF-8 bytes (surrogates kept, as escape.utf8 does).

    >>> sha256_text("")[:12]
    'e3b0c44298fc'
    """
    return hashlib.sha256(utf8(text)).hexdigest()

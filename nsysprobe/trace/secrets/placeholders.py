"""What a replaced part of a text becomes: a placeholder ``<kind:letters>`` (``PLACEHOLDER``),
and why the figures stay the same. Every rule (``names``, ``settings``, ``flags``, ``forms``)
reads the text's pattern, its digits masked (``RUN``), and leaves the placeholders of earlier
rules alone.
"""

from __future__ import annotations

import re

# What each kind of replaced text becomes: ``<kind:hash>`` (see ``Scrubber``).
SECRET = "secret"
LOCAL_PATH = "path"
ADDRESS = "address"
URL = "url"
HOST = "host"
# A placeholder: the kind, 12 lowercase letters (a keyed hash of the replaced text with its
# digits masked) and, when it held digits, 12 digits (a keyed hash of the text as it was).
PLACEHOLDER = re.compile(r"<(secret|path|address|url|host):[a-z]{12}(?:[0-9]{12})?>")


# How scrubbing keeps the figures. The analyses tell names apart by equality and group NVTX
# ranges by their pattern (``range_pattern``: each run of digits becomes ``#``). So what is
# replaced is decided on the text's pattern alone (``Batch 3 /data/ab.jpg`` and
# ``Batch 4 /data/cd.jpg`` alike), never on its digits, and each replaced part becomes
# ``<kind:letters>``, the letters a keyed hash (HMAC, a key per scrub) of the part's pattern,
# which a pattern keeps as it is; a part that held digits (or ``#``) gets 12 digits more, a
# keyed hash of the part as it was, which a pattern masks as its own digits. Two names then
# have equal patterns after scrubbing exactly when they had before, and are equal exactly when
# they were, up to hash collisions (2^-56 a pair of patterns, 2^-40 a pair of texts of one
# pattern).
#
# So every rule reads the pattern: digits are ``#`` there (a ``#`` of the text too,
# which ``range_pattern`` cannot tell from a digit either). Every rule starts only where a run
# of its characters starts (a lookbehind) or at a fixed text, so scrubbing is linear in the
# text's length: a crafted 16 MiB name costs seconds, not hours of backtracking. What a
# rule reads past its regex (a value's quotes, the pieces of a run) it reads once. Each rule
# runs only when the text holds what it needs.

# A run of digits as ``range_pattern`` masks it, or a ``#``.
RUN = re.compile(r"\d+|#")
HASH = re.compile("#")
CACHED_CHARS = 1024
LETTERS = 12
DIGITS = 12
KINDS = "secret|path|address|url|host"


class TooMany(Exception):
    """A text of more than ``MAX_PLACEHOLDERS`` secrets, paths, addresses and the like."""

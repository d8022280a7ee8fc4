"""What a report may print (``nsysprobe/common/safetext.py``): every control and format
character escaped but newlines and tabs, for text of ASCII only and for any text."""

from __future__ import annotations

import unicodedata

from nsysprobe.common.safetext import printable


def test_printable_escapes_exactly_the_characters_unicodedata_calls_control_or_format():
    kept = "\n\t"
    for cp in range(0x110000):
        c = chr(cp)
        category = unicodedata.category(c)
        unsafe = c not in kept and category in ("Cc", "Cf", "Cs", "Zl", "Zp")
        # Alone (ASCII text when c is) and beside a letter that is not ASCII.
        for text in (c, f"é{c}"):
            out = printable(text)
            if unsafe:
                assert c not in out, hex(cp)
                assert out.endswith(f"\\u{cp:04x}") or 0xFFFF < cp, hex(cp)
            elif category != "Cn":  # unassigned in this Python's Unicode: newer may say format
                assert out == text, hex(cp)

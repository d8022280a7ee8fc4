"""Secrets, paths and addresses in the text an export shows, replaced so that the figures
stay the same: what ``nsysprobe scrub`` (``nsysprobe.trace.scrub``) runs on every text it keeps
(``scrubber.scrub_text``).

Its modules, in the order they build on each other: ``placeholders`` (what a replaced part
becomes, and why the figures stay the same), ``names`` (which names say secret), ``settings``
(where the value after such a name is, and where it ends), ``flags`` (the password flags of
common tools), ``forms`` (what is known by its form: keys and tokens, random runs, hex, URLs,
addresses, paths, host names, IP addresses), ``scrubber`` (the rules in their order, and
``Scrubber`` and ``scrub_text``, which apply them).
"""

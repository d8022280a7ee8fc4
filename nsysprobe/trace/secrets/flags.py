"""The password flags of common tools (``_TOOL_FLAGS``: ``sshpass -p``, ``curl -su``,
``rar -hp``, ``htpasswd -b``), read within the command that names the tool (``tool_flags``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from nsysprobe.trace.secrets.placeholders import SECRET
from nsysprobe.trace.secrets.settings import only_placeholders

# Password flags of common tools, read within the command that names the tool (``-p`` means
# a port or a path to most other programs). A flag as written below: a short one takes its
# value attached or as the next word (``mysql -pK``, ``sshpass -p K``), also at the end of
# a group of short flags (``curl -su user:K``); a long one after ``=`` or as the next word
# (``curl --proxy-user user:K``); one of several letters after one dash is an option of its
# own, its value attached or next (``rar -hpK``); ``+N`` after a flag: its value is the Nth
# word after it that is no option (``htpasswd -b FILE USER K``, ``vault login K``, ``net use
# \\srv\share /user:NAME K``). A value never starts with ``-``; ``<<<`` before it is a
# here-string's. Tools whose options are whole words (``openssl -keyout``) take no attached
# value. Flags that say what they are (``--password``, ``-storepass``) are names, read above.
_TOOL_FLAGS = {
    **dict.fromkeys(
        "sshpass mysql mysqldump mysqladmin mysqlimport mysqlshow mariadb mariadb-dump "
        "mongo mongosh mongodump mongorestore mongoexport mongoimport #z #za twine "
        "login".split(),  # docker/podman/helm login -p
        "-p",
    ),
    **dict.fromkeys("rar unrar".split(), "-p -hp"),
    **dict.fromkeys("sqlcmd bcp ipmitool zip unzip".split(), "-P"),
    **dict.fromkeys("ldapsearch ldapadd ldapmodify ldapdelete ldappasswd ldapwhoami".split(), "-w"),
    "redis-cli": "-a",
    "smbclient": "-U",
    "curl": "-u -U --user --proxy-user",
    "openssl": "-k",
    "ssh-keygen": "-N -P",
    "htpasswd": "-b+3",
    "vault": "login+1",
    "net": "/user:+1",
}
_WHOLE_WORD_OPTIONS = frozenset({"openssl"})
TOOL = re.compile(
    r"(?<![\w#.-])(?P<tool>"
    + "|".join(re.escape(t) for t in sorted(_TOOL_FLAGS, key=len, reverse=True))
    + r")(?![\w#.-])"
)
_COMMAND_END = re.compile(r"[;&|\n]")
# The parts of a command's words: quoted parts go whole (``-p 'a b'``), a quote its line
# does not close is a part of its own. A word is its parts next to each other (read without
# a repeated group, whose stack grows with the word: a 16 MiB word took 2 GB).
_ARG_PART = re.compile(r"""[^\s"']+|"[^"\n]*"|'[^'\n]*'|["']""")
_SHORT_GROUP = re.compile("-[A-Za-z]{2,}")


def tool_flags(pattern: str) -> Iterator[tuple[int, int, str]]:
    """The values of the password flags of the tools in ``_TOOL_FLAGS``."""
    end = 0
    for tool in TOOL.finditer(pattern):
        if tool.start() < end:
            continue
        stop = _COMMAND_END.search(pattern, tool.end())
        end = stop.start() if stop else len(pattern)
        for start, stop in _flag_values(pattern, tool.end(), end, tool["tool"]):
            if not only_placeholders(pattern[start:stop]):
                yield start, stop, SECRET


def _flag_values(pattern: str, start: int, end: int, tool: str) -> Iterator[tuple[int, int]]:
    """The values of ``tool``'s password flags in its command's words, ``start`` to ``end``."""
    flags = _TOOL_FLAGS[tool].split()
    attached = tool not in _WHOLE_WORD_OPTIONS
    waiting, positional = None, False  # words to pass before a flag's value, once one is read
    for first, last in _words(pattern, start, end):
        text = pattern[first:last]
        if waiting is not None:
            if text == "<<<" or (positional and text.startswith("-")):
                continue
            if not text.startswith("-"):
                if not waiting:
                    yield first, last
                waiting = waiting - 1 if waiting else None
                continue
            waiting = None  # a flag with no value: this word is read as one below
        for flag in flags:
            found = _flag_in(text, flag, attached)
            if found is None:
                continue
            at, waiting = found
            positional = "+" in flag
            if at is not None and at < len(text):
                yield first + at, last
                waiting = None
            break


def _words(pattern: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The spans of the words between ``start`` and ``end`` (``_ARG_PART``)."""
    first = last = None
    for part in _ARG_PART.finditer(pattern, start, end):
        if part.start() != last:
            if first is not None:
                yield first, last
            first = part.start()
        last = part.end()
    if first is not None:
        yield first, last


def _flag_in(word: str, flag: str, attached: bool) -> tuple[int | None, int] | None:
    """How ``word`` holds ``flag`` (see ``_TOOL_FLAGS``): where its attached value starts
    (None for none) and how many words after it to pass before its value; None when it
    does not hold it."""
    flag, plus, nth = flag.partition("+")
    if plus:
        group = len(flag) == 2 and _SHORT_GROUP.fullmatch(word) and flag[1] in word
        spelled = word.startswith(flag) or (flag[0] == "/" and word[: len(flag)].lower() == flag)
        return (None, int(nth) - 1) if group or spelled else None
    if word == flag:
        return None, 0
    if flag.startswith("--") or not attached:
        return (len(flag) + 1, 0) if word.startswith(flag + "=") else None
    if word.startswith(flag) and not word.startswith("--"):
        return len(flag) + (word[len(flag) : len(flag) + 1] == "="), 0
    if len(flag) == 2 and _SHORT_GROUP.fullmatch(word) and word[-1] == flag[1]:
        return None, 0
    return None

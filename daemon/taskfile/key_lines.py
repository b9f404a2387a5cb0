"""Where each key of a TOML document is set: its line, so that a message about a key can point
at the key's own line (``runbroker check``, a busy key's refusal).

``tomllib`` gives values, not places. This reads the text as TOML lays it out (table headers,
dotted keys, inline tables; strings, arrays and comments passed over) for a document
``tomllib`` has read already: it diagnoses nothing, and what it does not follow only goes
without a line. A key is found by its path from the document's root (``("tasks", "a",
"schedule")``); a table by its header's path, or by the first key that opens it.
"""

from __future__ import annotations

import contextlib
import re
import tomllib
from bisect import bisect_right

KeyPath = tuple[str, ...]

_SPACE = re.compile(r"[ \t]*")
_BLANK = re.compile(r"(?:[ \t\r\n]|#[^\n]*)*")  # spaces, newlines and comments
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_BASIC = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_LITERAL = re.compile(r"'[^'\n]*'")
_ML_BASIC = re.compile(r'"""(?:[^\\]|\\.)*?"""(?:"{1,2}(?!"))?', re.DOTALL)
_ML_LITERAL = re.compile(r"'''.*?'''(?:'{1,2}(?!'))?", re.DOTALL)
_SCALAR = re.compile(r"[^,\]}\n#]*")  # a number, a date and time, a boolean
_REST_OF_LINE = re.compile(r"[^\n]*")
_NEWLINE = re.compile("\n")


def key_lines(text: str) -> dict[KeyPath, int]:
    """Each key and table of ``text`` (a TOML document) with the line (from 1) it is set on."""
    scanner = _Scanner(text)
    with contextlib.suppress(IndexError, ValueError, tomllib.TOMLDecodeError):
        scanner.document()  # past what it does not read as TOML, the lines found so far stand
    return scanner.found


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.found: dict[KeyPath, int] = {}
        self._newlines = [match.start() for match in _NEWLINE.finditer(text)]

    def line(self, pos: int) -> int:
        return bisect_right(self._newlines, pos - 1) + 1

    def note(self, path: KeyPath, pos: int) -> None:
        self.found.setdefault(path, self.line(pos))

    def skip(self, pattern: re.Pattern[str]) -> str:
        match = pattern.match(self.text, self.pos)
        if match is None:
            raise ValueError(f"unexpected text at {self.pos}")
        self.pos = match.end()
        return match.group()

    def document(self) -> None:
        table: KeyPath = ()
        while True:
            self.skip(_BLANK)
            if self.pos >= len(self.text):
                return
            start = self.pos
            if self.text.startswith("[", self.pos):
                double = self.text.startswith("[[", self.pos)
                self.pos += 2 if double else 1
                table = self.key()
                for end in range(1, len(table) + 1):  # the tables it opens, unless set before
                    self.note(table[:end], start)
                self.skip(_SPACE)
                self.pos += 2 if double else 1  # the closing bracket(s)
            else:
                self.key_value(table, self.key(), start)
            self.skip(_REST_OF_LINE)

    def key(self) -> KeyPath:
        """A dotted key: its parts unquoted."""
        parts = []
        while True:
            self.skip(_SPACE)
            char = self.text[self.pos]
            if char == '"':
                parts.append(str(tomllib.loads(f"k = {self.skip(_BASIC)}")["k"]))
            elif char == "'":
                parts.append(self.skip(_LITERAL)[1:-1])
            else:
                parts.append(self.skip(_BARE))
            self.skip(_SPACE)
            if not self.text.startswith(".", self.pos):
                return tuple(parts)
            self.pos += 1

    def key_value(self, table: KeyPath, key: KeyPath, start: int) -> None:
        """``key = value`` in ``table``, from the ``=`` on: every table the key's dots open is
        set on this line too, unless it was set before."""
        for end in range(1, len(key) + 1):
            self.note((*table, *key[:end]), start)
        path = (*table, *key)
        self.skip(_SPACE)
        if not self.text.startswith("=", self.pos):
            raise ValueError(f"expected '=' at {self.pos}")
        self.pos += 1
        self.value(path)

    def value(self, path: KeyPath | None) -> None:
        """Pass over one value; the keys of an inline table under ``path`` are noted (None: in
        an array, where a key has no path)."""
        self.skip(_SPACE)
        text, pos = self.text, self.pos
        if text.startswith('"""', pos):
            self.skip(_ML_BASIC)
        elif text.startswith("'''", pos):
            self.skip(_ML_LITERAL)
        elif text.startswith('"', pos):
            self.skip(_BASIC)
        elif text.startswith("'", pos):
            self.skip(_LITERAL)
        elif text.startswith("[", pos):
            self.pos += 1
            self.items("]", None)
        elif text.startswith("{", pos):
            self.pos += 1
            self.items("}", path)
        else:
            self.skip(_SCALAR)

    def items(self, closing: str, table: KeyPath | None) -> None:
        """An array's values or an inline table's ``key = value`` pairs, up to ``closing``."""
        while True:
            self.skip(_BLANK)
            if self.text.startswith(closing, self.pos):
                self.pos += 1
                return
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            before = self.pos
            if closing == "}":
                key = self.key()
                if table is None:
                    self.skip(_SPACE)
                    self.pos += 1  # the '='
                    self.value(None)
                else:
                    self.key_value(table, key, before)
            else:
                self.value(None)
            if self.pos == before:  # nothing read: not TOML as read here
                raise ValueError(f"stuck at {self.pos}")

"""The items of one array in a large JSON object, read one at a time (sacct --json).

``json.load`` holds the whole document, and a 300 MB ``sacct --json`` file peaked at
2.9 GB. This reads the top-level object's keys in order, skips the other values (each
decoded alone, so each is bounded too) and hands out the wanted array's items one by
one; at most one item (``MAX_ITEM_CHARS``) and one read chunk are held at a time.
Nesting deeper than Python's JSON decoder can follow is a clear error, not a
RecursionError traceback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import IO, Any

MAX_ITEM_CHARS = 8 * 1024 * 1024  # one job record (a real one is a few kB)
SPACE = re.compile(r"\s*")
DECODER = json.JSONDecoder()


class JsonReader:
    """A buffer over a text handle: ``first`` (already read), then the handle's rest."""

    def __init__(self, first: str, handle: IO[str], error: type[Exception]) -> None:
        self.text, self.pos, self.handle, self.eof = first, 0, handle, False
        self.error = error

    def items_of(self, key: str) -> Iterator[Any]:
        """Each item of the array under ``key`` of the top-level object."""
        self._expect("{", "not sacct --json output: expected an object")
        found = False
        while self._peek() != "}":
            name = self._value()
            if not isinstance(name, str):
                raise self.error("not sacct --json output: an object key is not text")
            self._expect(":", "not sacct --json output: expected ':' after a key")
            if name == key:
                found = True
                yield from self._array(key)
            else:
                self._value()  # meta, errors, warnings: decoded alone, then dropped
            if self._peek() == ",":
                self.pos += 1
        self.pos += 1
        if not found:
            raise self.error(f'not sacct --json output: no "{key}" list')

    def _array(self, key: str) -> Iterator[Any]:
        self._expect("[", f'not sacct --json output: "{key}" is not a list')
        count = 0
        while self._peek() != "]":
            count += 1
            yield self._value(f"{key} item {count}")
            if self._peek() == ",":
                self.pos += 1
            elif self._peek() != "]":
                raise self.error(f"not sacct --json output: expected ',' after {key} item {count}")
        self.pos += 1

    def _more(self) -> bool:
        """Read on (doubling the read while one value is incomplete); False at the end."""
        if self.eof:
            return False
        held = len(self.text) - self.pos
        piece = self.handle.read(max(1 << 16, held))
        if not piece:
            self.eof = True
            return False
        self.text, self.pos = self.text[self.pos :] + piece, 0
        return True

    def _peek(self) -> str:
        while True:
            match = SPACE.match(self.text, self.pos)
            self.pos = match.end() if match else self.pos
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self._more():
                raise self.error("not sacct --json output: the file ends inside the JSON")

    def _expect(self, char: str, message: str) -> None:
        if self._peek() != char:
            raise self.error(message)
        self.pos += 1

    def _value(self, what: str = "a value") -> Any:
        self._peek()
        while True:
            try:
                value, end = DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if len(self.text) - self.pos > MAX_ITEM_CHARS:
                    raise self.error(
                        f"{what} is longer than {MAX_ITEM_CHARS // 1024:,} kB of JSON (or is "
                        "not JSON): not a sacct job record"
                    ) from exc
                if self._more():
                    continue
                raise self.error(f"not sacct --json output: {what}: {exc.msg}") from exc
            except RecursionError as exc:
                raise self.error(
                    f"not sacct --json output: {what} is nested too deeply to be a job record"
                ) from exc
            # A number at the end of what was read may go on in the next read.
            more = end == len(self.text) and not isinstance(value, dict | list | str)
            if more and self._more():
                continue
            self.pos = end
            return value

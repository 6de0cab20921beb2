"""Slurm's compressed host lists (``NodeList``: ``gpu-[01-03,05],login1``) as the names
of the hosts, for the node-level DCGM matcher (``Hostname=~"{slurm_nodes|any}"``)."""

from __future__ import annotations

import re

RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_HOSTS = 4096  # a bound on what one job's list may expand to
EMPTY = {"", "None assigned", "(null)", "None"}


class HostlistError(ValueError):
    """A host list this reader cannot expand (unbalanced brackets, a bad range)."""


def expand(hostlist: str) -> list[str]:
    """The hosts of a Slurm host list, in order. Worked: ``gpu-[01-03,05],login1`` ->
    gpu-01, gpu-02, gpu-03, gpu-05, login1 (the width of ``01`` kept);
    ``r[1-2]-n[1-2]`` -> r1-n1, r1-n2, r2-n1, r2-n2."""
    text = hostlist.strip()
    if text in EMPTY:
        return []
    hosts: list[str] = []
    for part in _top_level(text):
        hosts += _one(part)
        if len(hosts) > MAX_HOSTS:
            raise HostlistError(f"{hostlist[:80]!r} names more than {MAX_HOSTS} hosts")
    return hosts


def _top_level(text: str) -> list[str]:
    """The list split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            raise HostlistError(f"{text[:80]!r}: brackets do not balance")
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise HostlistError(f"{text[:80]!r}: brackets do not balance")
    parts.append(text[start:])
    return [p for p in parts if p]


def _one(pattern: str) -> list[str]:
    """One host pattern with any number of bracketed ranges."""
    open_at = pattern.find("[")
    if open_at < 0:
        return [pattern]
    close_at = pattern.index("]", open_at)
    head, body, tail = pattern[:open_at], pattern[open_at + 1 : close_at], pattern[close_at + 1 :]
    return [head + n + rest for n in _numbers(body, pattern) for rest in _one(tail)]


def _numbers(body: str, pattern: str) -> list[str]:
    out = []
    for item in body.split(","):
        match = RANGE.match(item.strip())
        if match is None:
            raise HostlistError(f"{pattern[:80]!r}: {item!r} is not a number or a range")
        low, high = match.group(1), match.group(2) or match.group(1)
        if int(high) < int(low) or int(high) - int(low) > MAX_HOSTS:
            raise HostlistError(f"{pattern[:80]!r}: the range {item!r} is not a range of hosts")
        out += [str(n).zfill(len(low)) for n in range(int(low), int(high) + 1)]
    return out

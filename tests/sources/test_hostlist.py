"""Slurm's compressed host lists expanded (app/sources/hostlist.py)."""

from __future__ import annotations

import pytest

from app.sources.hostlist import HostlistError, expand


def test_ranges_lists_and_widths() -> None:
    assert expand("gpu-[01-03,05],login1") == ["gpu-01", "gpu-02", "gpu-03", "gpu-05", "login1"]
    assert expand("r[1-2]-n[8-9]") == ["r1-n8", "r1-n9", "r2-n8", "r2-n9"]
    assert expand("node7") == ["node7"]
    assert expand("None assigned") == [] and expand("") == []


@pytest.mark.parametrize("bad", ["gpu-[01-03", "gpu-01]", "gpu-[a-b]", "gpu-[5-1]", "n[0-99999]"])
def test_lists_it_cannot_expand_are_refused(bad: str) -> None:
    with pytest.raises(HostlistError):
        expand(bad)

"""Which cloud resource ids join a run to a bill line. Pure.

A run names the resources it held in its ``cloud_resource_id`` tag; a bill line names
one in ``ResourceId``. They join when:

- both spell the same id (an Azure id, ``/subscriptions/...``, compared without case:
  Azure treats resource ids case-insensitively and its exports mix the case);
- the run names the line's last segment (``i-0abc`` for the line's
  ``arn:aws:ec2:...:instance/i-0abc``, an Azure VM name, a GCP instance name);
- the run names an ARN (as docs/finops.md advises) whose instance id is the line's
  whole id (AWS CUR and FOCUS exports often name the bare ``i-0abc``).

Two different full ids that only share a last segment (the same VM name in two
resource groups) do not join.
"""

from __future__ import annotations

import re

AZURE = "/subscriptions/"


def resource_tail(resource_id: str) -> str:
    """The last segment of a resource id: ``i-0abc`` of an AWS instance ARN, the VM name
    of an Azure ARM path, the instance of a GCP URI."""
    return resource_id.rstrip("/").rsplit("/", 1)[-1]


def short_id(resource_id: str) -> str:
    """An ARN's resource id (``instance/i-0abc`` or ``instance:i-0abc`` -> ``i-0abc``),
    else the last segment."""
    if resource_id.startswith("arn:"):
        return re.split(r"[/:]", resource_id.split(":", 5)[-1])[-1]
    return resource_tail(resource_id)


def is_azure(resource_id: str) -> bool:
    return resource_id.lower().startswith(AZURE)


def holding_keys(resource_id: str) -> set[str]:
    """The keys a run's resource is found by: its id ("=") and its short form ("~"),
    each also lower-cased ("ci") for Azure lines."""
    short = short_id(resource_id)
    return {
        f"=:{resource_id}",
        f"~:{short}",
        f"ci=:{resource_id.lower()}",
        f"ci~:{short.lower()}",
    }


def line_keys(resource_id: str) -> set[str]:
    """The keys a bill line looks for: runs that named its id or its last segment, or
    whose short form (an ARN's instance id) is its id."""
    ci = "ci" if is_azure(resource_id) else ""
    fold = str.lower if ci else str
    whole, tail = fold(resource_id), fold(resource_tail(resource_id))
    return {f"{ci}=:{whole}", f"{ci}=:{tail}", f"{ci}~:{whole}"}

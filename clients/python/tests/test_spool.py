"""The spool: atomic files, an idempotent flush, refused runs set aside, its directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import make_run

from cadence_client import CadenceClient, Spool
from cadence_client.spool import default_directory

BASE = "http://cadence.test"


class Store:
    """A server that stores runs by (pipeline, run_id) like Cadence's batch route: an
    identical retry is ``existing``, a different body 409, a run without workers 422."""

    def __init__(self, status: int | None = None) -> None:
        self.status = status
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.status is not None:
            return httpx.Response(self.status, json={"error": {"code": "x", "message": "no"}})
        runs = json.loads(request.content)["runs"]
        items = []
        for index, run in enumerate(runs):
            if "workers" not in run:
                error = {"code": "validation_error", "message": "bad", "fields": []}
                return httpx.Response(422, json={"error": error})
            key = (run["pipeline"], run["run_id"])
            if key in self.rows and self.rows[key] != run:
                return httpx.Response(409, json={"error": {"code": "conflict", "message": "x"}})
            status = "existing" if key in self.rows else "created"
            self.rows[key] = run
            items.append({"index": index, "id": len(self.rows), "status": status, **run})
        created = sum(i["status"] == "created" for i in items)
        body = {"created": created, "existing": len(items) - created, "runs": items}
        return httpx.Response(200, json=body)


def client(store: Store) -> CadenceClient:
    return CadenceClient(
        BASE, "cad_x", transport=httpx.MockTransport(store), sleep=lambda _s: None, max_attempts=2
    )


def test_a_write_is_one_whole_file_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    path = spool.write([make_run(run_id="a"), make_run(run_id="b")])
    assert list(spool.directory.iterdir()) == [path]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["run_id"] for line in lines] == ["a", "b"]


def test_a_flush_stores_each_run_once_even_when_run_twice(tmp_path: Path) -> None:
    spool, store = Spool(tmp_path), Store()
    spool.write([make_run(run_id="a")])
    spool.write([make_run(run_id="b")])
    first_copy = spool.files()[0].read_text(encoding="utf-8")
    with client(store) as cadence:
        done = spool.flush(cadence)
        assert (done.created, done.existing, done.remaining) == (2, 0, 0)
        assert spool.files() == []
        # A flush that died after posting but before deleting: the same file again.
        (tmp_path / "0-again.jsonl").write_text(first_copy, encoding="utf-8")
        again = spool.flush(cadence)
    assert (again.created, again.existing) == (0, 1)
    assert sorted(store.rows) == [("ranker", "a"), ("ranker", "b")]


def test_a_server_that_is_down_keeps_every_file_for_next_time(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.write([make_run(run_id="a")])
    spool.write([make_run(run_id="b")])
    with client(Store(status=503)) as cadence:
        done = spool.flush(cadence)
    assert done.stored == 0 and done.remaining == 2 and done.error is not None
    assert "503" in done.error
    assert len(spool.files()) == 2


def test_a_refused_run_is_set_aside_with_its_reason_and_the_others_go_on(
    tmp_path: Path,
) -> None:
    spool, store = Spool(tmp_path), Store()
    bad = make_run(run_id="bad")
    del bad["workers"]
    spool.write([bad])
    spool.write([make_run(run_id="good")])
    with client(store) as cadence:
        done = spool.flush(cadence)
    assert done.created == 1 and len(done.rejected) == 1
    assert list(store.rows) == [("ranker", "good")]
    rejected = Path(done.rejected[0])
    assert rejected.parent == tmp_path / "rejected"
    assert "422" in rejected.with_suffix(".reason").read_text(encoding="utf-8")
    assert spool.files() == []  # not sent again


def test_the_directory_is_the_setting_else_the_users_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CADENCE_SPOOL_DIR", str(tmp_path / "mine"))
    assert default_directory() == tmp_path / "mine"
    monkeypatch.delenv("CADENCE_SPOOL_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr("sys.platform", "linux")
    assert default_directory() == tmp_path / "cache" / "cadence" / "spool"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_directory() == tmp_path / "home" / ".cache" / "cadence" / "spool"


def test_spool_flush_exit_codes_say_what_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cadence_client.cli import parser, run_spool_flush

    def flush(store: Store) -> int:
        args = parser(extensions=[]).parse_args(
            ["spool", "flush", "--url", BASE, "--token", "cad_x", "--dir", str(tmp_path)]
        )
        return run_spool_flush(args, transport=httpx.MockTransport(store), sleep=lambda _s: None)

    Spool(tmp_path).write([make_run(run_id="a")])
    assert flush(Store(status=503)) == 5  # down: kept
    assert "1 left" in capsys.readouterr().out and len(Spool(tmp_path).files()) == 1
    bad = make_run(run_id="bad")
    del bad["workers"]
    Spool(tmp_path).write([bad])
    assert flush(Store()) == 1  # one stored, one refused and set aside
    out = capsys.readouterr().out
    assert "1 run(s) stored (1 created, 0 already there), 1 file(s) refused, 0 left" in out
    assert flush(Store()) == 0
    monkeypatch.delenv("CADENCE_TOKEN", raising=False)
    no_token = parser(extensions=[]).parse_args(["spool", "flush", "--dir", str(tmp_path)])
    assert run_spool_flush(no_token) == 2


def test_the_spool_directory_is_private_and_follows_no_symlink(tmp_path: Path) -> None:
    spool, store = Spool(tmp_path / "cache" / "spool"), Store()
    spool.write([make_run(run_id="a")])
    assert spool.directory.stat().st_mode & 0o777 == 0o700
    # A symlink planted in the spool, named like a spooled file, is never read or sent.
    secret = tmp_path / "secret.jsonl"
    secret.write_text(json.dumps(make_run(run_id="stolen")) + "\n", encoding="utf-8")
    (spool.directory / "0-planted.jsonl").symlink_to(secret)
    # And a refusal's .reason is never written through a symlink planted for it.
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n", encoding="utf-8")
    bad = make_run(run_id="bad")
    del bad["workers"]
    refused = spool.write([bad])
    rejected = spool.directory / "rejected"
    rejected.mkdir(mode=0o700)
    rejected.joinpath(refused.name).with_suffix(".reason").symlink_to(victim)
    with client(store) as cadence:
        done = spool.flush(cadence)
    assert list(store.rows) == [("ranker", "a")]  # not ("ranker", "stolen")
    assert victim.read_text(encoding="utf-8") == "keep me\n"
    reason = rejected / refused.with_suffix(".reason").name
    assert not reason.is_symlink() and "422" in reason.read_text(encoding="utf-8")
    assert len(done.rejected) == 1

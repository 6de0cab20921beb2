"""The client: retries, backoff, errors, paging and batching, scripted with
httpx.MockTransport (the round trips through a real server are in the server's tests)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any, Union

import httpx
import pytest
from conftest import make_run

from cadence_client import (
    AuthError,
    CadenceAPIError,
    CadenceClient,
    ConflictError,
    ServiceUnavailable,
    ValidationFailed,
)

BASE = "http://cadence.test"
Step = Union[httpx.Response, Exception, Callable[[httpx.Request], httpx.Response]]


class Script:
    """A MockTransport handler that answers with the scripted steps, in order."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if not self.steps:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        step = self.steps.pop(0)
        if isinstance(step, Exception):
            raise step
        if isinstance(step, httpx.Response):
            return step
        return step(request)

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) for r in self.requests]


class Ceiling(random.Random):
    """Full jitter at its largest: every backoff is the whole ceiling."""

    def uniform(self, a: float, b: float) -> float:
        return b


def error(
    status: int,
    code: str,
    message: str = "nope",
    *,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> httpx.Response:
    """An answer with Cadence's error body."""
    body = {"code": code, "message": message, **extra}
    return httpx.Response(status, json={"error": body}, headers=headers)


def unavailable(retry_after: str | None = None) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else None
    return error(503, "database_unavailable", "the database is unavailable", headers=headers)


def stored(status: int = 201, **fields: Any) -> httpx.Response:
    return httpx.Response(status, json={"id": 7, **make_run(), **fields})


@pytest.fixture
def sleeps() -> list[float]:
    return []


def make_client(script: Script, sleeps: list[float], **kwargs: Any) -> CadenceClient:
    kwargs.setdefault("rng", Ceiling())
    return CadenceClient(
        BASE, "cad_secret", transport=httpx.MockTransport(script), sleep=sleeps.append, **kwargs
    )


def test_post_run_sends_the_token_and_json_and_returns_the_stored_run(
    sleeps: list[float],
) -> None:
    script = Script(stored(201))
    with make_client(script, sleeps) as client:
        started = datetime(2026, 11, 2, 8, tzinfo=timezone.utc)
        out = client.post_run(make_run(started_at=started))
    assert out["id"] == 7
    [request] = script.requests
    assert request.method == "POST"
    assert request.url == f"{BASE}/api/v1/runs"
    assert request.headers["Authorization"] == "Bearer cad_secret"
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.content)["started_at"] == "2026-11-02T08:00:00+00:00"
    assert sleeps == []


def test_an_identical_retry_answered_200_is_a_success(sleeps: list[float]) -> None:
    with make_client(Script(stored(200)), sleeps) as client:
        assert client.post_run(make_run())["run_id"] == "run-1"


def test_503_is_retried_after_the_servers_retry_after(sleeps: list[float]) -> None:
    script = Script(unavailable("2"), unavailable("3"), stored(201))
    with make_client(script, sleeps) as client:
        assert client.post_run(make_run())["id"] == 7
    assert sleeps == [2.0, 3.0]
    assert len(script.requests) == 3
    assert script.bodies()[0] == script.bodies()[2]  # the same body: the retry is idempotent


def test_retry_after_is_capped_at_backoff_max(sleeps: list[float]) -> None:
    script = Script(unavailable("30"), stored())
    with make_client(script, sleeps, backoff_max=1.5) as client:
        client.post_run(make_run())
    assert sleeps == [1.5]


def test_retry_after_as_an_http_date(sleeps: list[float]) -> None:
    when = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=4), usegmt=True)
    script = Script(unavailable(when), stored())
    with make_client(script, sleeps) as client:
        client.post_run(make_run())
    [delay] = sleeps
    assert 2 <= delay <= 4


def test_a_connection_error_and_a_timeout_are_retried(sleeps: list[float]) -> None:
    script = Script(
        httpx.ConnectError("connection refused"),
        httpx.ReadTimeout("timed out"),
        stored(),
    )
    with make_client(script, sleeps, backoff_base=0.5) as client:
        assert client.post_run(make_run())["id"] == 7
    assert sleeps == [0.5, 1.0]  # no Retry-After: exponential backoff
    assert len(script.requests) == 3


def test_429_is_retried(sleeps: list[float]) -> None:
    script = Script(error(429, "too_many_requests", headers={"Retry-After": "1"}), stored())
    with make_client(script, sleeps) as client:
        client.post_run(make_run())
    assert sleeps == [1.0]


def test_a_500_without_a_json_body_is_retried(sleeps: list[float]) -> None:
    script = Script(httpx.Response(502, text="Bad Gateway"), stored())
    with make_client(script, sleeps, backoff_base=0.1) as client:
        client.post_run(make_run())
    assert sleeps == [0.1]


def test_422_is_not_retried_and_carries_the_fields(sleeps: list[float]) -> None:
    fields = [{"field": "gpu_utilization", "reason": "must be a fraction between 0 and 1"}]
    script = Script(error(422, "validation_error", "invalid request", fields=fields))
    with make_client(script, sleeps) as client, pytest.raises(ValidationFailed) as info:
        client.post_run(make_run(gpu_utilization=38))
    assert len(script.requests) == 1
    assert sleeps == []
    exc = info.value
    assert (exc.status, exc.code, exc.message) == (422, "validation_error", "invalid request")
    assert exc.fields == fields
    assert isinstance(exc, CadenceAPIError)


def test_409_is_a_conflict_error(sleeps: list[float]) -> None:
    fields = [{"field": "workers", "reason": "stored 8, sent 16"}]
    script = Script(error(409, "conflict", "run-1 exists with different values", fields=fields))
    with make_client(script, sleeps) as client, pytest.raises(ConflictError) as info:
        client.post_run(make_run(workers=16))
    assert len(script.requests) == 1
    assert info.value.status == 409
    assert info.value.fields == fields


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failures_are_auth_errors(sleeps: list[float], status: int) -> None:
    script = Script(error(status, "unauthorized" if status == 401 else "forbidden"))
    with make_client(script, sleeps) as client, pytest.raises(AuthError) as info:
        client.post_run(make_run())
    assert info.value.status == status
    assert len(script.requests) == 1


def test_other_4xx_are_generic_api_errors_and_not_retried(sleeps: list[float]) -> None:
    script = Script(error(413, "payload_too_large", "body over 1 MiB"))
    with make_client(script, sleeps) as client, pytest.raises(CadenceAPIError) as info:
        client.post_run(make_run())
    assert type(info.value) is CadenceAPIError
    assert (info.value.status, info.value.code) == (413, "payload_too_large")
    assert len(script.requests) == 1


def test_backoff_grows_is_capped_and_gives_up_with_unavailable(sleeps: list[float]) -> None:
    script = Script(*[unavailable() for _ in range(8)])
    with (
        make_client(script, sleeps, max_attempts=8, backoff_base=0.25, backoff_max=2) as client,
        pytest.raises(ServiceUnavailable) as info,
    ):
        client.post_run(make_run())
    assert sleeps == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0]  # no sleep after the last attempt
    assert len(script.requests) == 8
    exc = info.value
    assert exc.attempts == 8
    assert exc.status == 503
    assert exc.code == "database_unavailable"
    assert isinstance(exc.cause, CadenceAPIError)
    assert exc.__cause__ is exc.cause


def test_full_jitter_stays_under_the_ceiling(sleeps: list[float]) -> None:
    script = Script(*[httpx.ConnectError("refused") for _ in range(6)])
    with (
        make_client(
            script, sleeps, max_attempts=6, backoff_base=1, backoff_max=4, rng=random.Random(3)
        ) as client,
        pytest.raises(ServiceUnavailable) as info,
    ):
        client.post_run(make_run())
    ceilings = [1, 2, 4, 4, 4]
    assert len(sleeps) == len(ceilings)
    assert all(0 <= s <= c for s, c in zip(sleeps, ceilings))
    assert len(set(sleeps)) == len(sleeps)  # random, not a fixed schedule
    assert isinstance(info.value.cause, httpx.ConnectError)
    assert info.value.status is None


def test_list_runs_follows_the_cursor(sleeps: list[float]) -> None:
    script = Script(
        httpx.Response(200, json={"runs": [{"id": 3}, {"id": 2}], "next_cursor": "c2"}),
        unavailable("0"),  # a page fetch is retried like any request
        httpx.Response(200, json={"runs": [{"id": 1}], "next_cursor": None}),
    )
    with make_client(script, sleeps) as client:
        runs = client.list_runs(pipeline="ranker", variant="candidate", limit=2)
        assert isinstance(runs, Iterator)
        assert [r["id"] for r in runs] == [3, 2, 1]
    first, _, last = (r.url.params for r in script.requests)
    assert dict(first) == {"pipeline": "ranker", "variant": "candidate", "limit": "2"}
    assert dict(last) == {**first, "cursor": "c2"}


def batch_answer(request: httpx.Request) -> httpx.Response:
    runs = json.loads(request.content)["runs"]
    items = [
        {
            "index": i,
            "id": int(r["run_id"].removeprefix("r")) + 100,
            "run_id": r["run_id"],
            "pipeline": r["pipeline"],
            "status": "existing" if r["run_id"] == "r0" else "created",
        }
        for i, r in enumerate(runs)
    ]
    created = sum(i["status"] == "created" for i in items)
    body = {"created": created, "existing": len(items) - created, "runs": items}
    return httpx.Response(201, json=body)


def test_post_runs_chunks_into_batches(sleeps: list[float]) -> None:
    runs = [make_run(run_id=f"r{i}") for i in range(5)]
    script = Script(batch_answer, unavailable("0"), batch_answer, batch_answer)
    with make_client(script, sleeps) as client:
        result = client.post_runs(runs, batch_size=2)
    sent = [[r["run_id"] for r in body["runs"]] for body in script.bodies()]
    assert sent == [["r0", "r1"], ["r2", "r3"], ["r2", "r3"], ["r4"]]
    assert script.requests[0].url == f"{BASE}/api/v1/runs/batch"
    assert (result.created, result.existing, result.batches) == (4, 1, 3)
    assert result.ids == [100, 101, 102, 103, 104]
    assert [i["index"] for i in result.items] == [0, 1, 2, 3, 4]
    assert result.existing_ids == [100]
    assert result.created_ids == [101, 102, 103, 104]


def test_post_runs_names_the_bad_run_by_its_index_in_your_list(sleeps: list[float]) -> None:
    runs = [make_run(run_id=f"r{i}") for i in range(4)]
    fields = [{"field": "runs.1.gpu_utilization", "reason": "must be a fraction"}]
    script = Script(batch_answer, error(422, "validation_error", fields=fields))
    with make_client(script, sleeps) as client, pytest.raises(ValidationFailed) as info:
        client.post_runs(runs, batch_size=2)
    assert info.value.batch_offset == 2
    assert info.value.fields == [
        {"field": "runs.3.gpu_utilization", "reason": "must be a fraction"}
    ]


def test_post_runs_with_nothing_sends_nothing(sleeps: list[float]) -> None:
    with make_client(Script(), sleeps) as client:
        assert client.post_runs([]).ids == []


def test_nan_is_refused_before_sending(sleeps: list[float]) -> None:
    script = Script()
    with make_client(script, sleeps) as client, pytest.raises(ValueError):
        client.post_run(make_run(gpu_utilization=float("nan")))
    assert script.requests == []


def test_health(sleeps: list[float]) -> None:
    ok = Script(httpx.Response(200, json={"status": "ok"}))
    down = Script(unavailable("5"))
    gone = Script(httpx.ConnectError("refused"))
    for script, expected in ((ok, True), (down, False), (gone, False)):
        with make_client(script, sleeps) as client:
            assert client.health() is expected
        assert script.requests[0].url == f"{BASE}/readyz"
    assert sleeps == []  # no retries


def test_an_injected_httpx_client_is_used_and_left_open(sleeps: list[float]) -> None:
    script = Script(stored())
    http = httpx.Client(transport=httpx.MockTransport(script))
    with CadenceClient(BASE, "cad_secret", client=http, sleep=sleeps.append) as client:
        client.post_run(make_run())
    assert len(script.requests) == 1
    assert not http.is_closed
    http.close()


def test_errors_name_the_method_and_url_that_failed(sleeps: list[float]) -> None:
    fields = [{"field": "gpu_utilization", "reason": "must be a fraction between 0 and 1"}]
    script = Script(error(422, "validation_error", "invalid request", fields=fields))
    with make_client(script, sleeps) as client, pytest.raises(ValidationFailed) as info:
        client.post_run(make_run(gpu_utilization=38))
    assert (info.value.method, info.value.url) == ("POST", f"{BASE}/api/v1/runs")
    assert str(info.value) == f"POST {BASE}/api/v1/runs: 422 validation_error: invalid request"


def test_service_unavailable_names_the_url_and_the_last_error(sleeps: list[float]) -> None:
    script = Script(unavailable(), unavailable())
    with (
        make_client(script, sleeps, max_attempts=2) as client,
        pytest.raises(ServiceUnavailable) as info,
    ):
        list(client.list_runs(pipeline="ranker"))
    assert info.value.url == f"{BASE}/api/v1/runs"
    assert str(info.value) == (
        f"GET {BASE}/api/v1/runs: 503 database_unavailable: failed after 2 attempts; "
        "last error: the database is unavailable"
    )


def test_projection_sends_the_what_ifs_as_query_parameters(sleeps: list[float]) -> None:
    script = Script(httpx.Response(200, json={"pipeline": "ranker"}))
    with make_client(script, sleeps) as client:
        out = client.projection("ranker", cadences=[1, 2.5], price=3.0, workers=None)
    assert out == {"pipeline": "ranker"}
    [request] = script.requests
    assert request.url.path == "/api/v1/pipelines/ranker/projection"
    assert dict(request.url.params) == {"cadences": "1,2.5", "price": "3.0"}


def test_list_pipelines(sleeps: list[float]) -> None:
    body = {"pipelines": [{"name": "a"}, {"name": "b"}]}
    with make_client(Script(httpx.Response(200, json=body)), sleeps) as client:
        assert [p["name"] for p in client.list_pipelines()] == ["a", "b"]


def test_post_evaluations_sends_the_batch_to_the_pipeline(sleeps: list[float]) -> None:
    answer = httpx.Response(201, json={"created": 1, "existing": 0, "evaluations": []})
    script = Script(answer)
    with make_client(script, sleeps) as client:
        at = datetime(2026, 11, 9, 22, tzinfo=timezone.utc)
        out = client.post_evaluations(
            "recsys-ranker", [{"run_id": "r1", "evaluated_at": at, "value": 0.79}]
        )
    assert out["created"] == 1
    [request] = script.requests
    assert request.url == f"{BASE}/api/v1/pipelines/recsys-ranker/evaluations"
    sent = json.loads(request.content)["evaluations"][0]
    assert sent == {"run_id": "r1", "evaluated_at": "2026-11-09T22:00:00+00:00", "value": 0.79}


def test_update_measurements_posts_batches_and_sums_their_counts(sleeps: list[float]) -> None:
    script = Script(
        httpx.Response(200, json={"updated": 2, "unchanged": 0, "runs": []}),
        httpx.Response(200, json={"updated": 0, "unchanged": 1, "runs": []}),
    )
    runs = [{"run_id": f"r{i}", "gpu_utilization": 0.5} for i in range(3)]
    with make_client(script, sleeps) as client:
        totals = client.update_measurements("ranker", runs, batch_size=2)
    assert totals == {"updated": 2, "unchanged": 1}
    assert [r.url.path for r in script.requests] == ["/api/v1/pipelines/ranker/measurements"] * 2
    assert [len(b["runs"]) for b in script.bodies()] == [2, 1]


def test_update_measurements_names_the_refused_run_in_the_whole_list(
    sleeps: list[float],
) -> None:
    script = Script(
        httpx.Response(200, json={"updated": 2, "unchanged": 0, "runs": []}),
        error(
            422, "validation_error", fields=[{"field": "runs.0.run_id", "reason": "no such run"}]
        ),
    )
    runs = [{"run_id": f"r{i}", "mfu": 0.3} for i in range(3)]
    with make_client(script, sleeps) as client, pytest.raises(ValidationFailed) as caught:
        client.update_measurements("ranker", runs, batch_size=2)
    assert caught.value.batch_offset == 2
    assert caught.value.fields == [{"field": "runs.2.run_id", "reason": "no such run"}]

"""The organisation's cadence plan over `cadence demo`'s six pipelines: the API, its CSV,
its 422s, the org budget setting (API and admin form), the overview's section and
`cadence plan`'s Markdown."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from typing import Any

import pytest
from cadence_client.commands.plan import run_plan
from fastapi.testclient import TestClient

from app.analytics import month
from app.analytics.prior import org_prior
from app.db.engine import Database
from app.demo import load_demo, week_start
from app.demo_portfolio import ORG_BUDGET_USD, load_portfolio_demo
from app.pipelines import service as pipelines
from app.portfolio import plan as org_service
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.client import URL, args, through
from tests.fixtures.security import HTML, csrf_value, sign_in

PLAN = "/api/v1/portfolio/plan"
EMBEDDER = "search-embedder"


def _load(db: Database) -> None:
    with db.write() as s:
        load_demo(s)
        now = datetime.now(UTC)
        load_portfolio_demo(s, week_start(now), now)


@pytest.fixture
def org(client: TestClient, db: Database) -> TestClient:
    _load(db)
    return client


def rows(body: dict) -> dict[str, dict]:
    return {r["name"]: r for r in body["pipelines"]}


def test_the_budget_decides_whether_the_embedder_retrains_twice_weekly(org: TestClient) -> None:
    # The embedder's expected bill at 1 and 2 runs a week is the projection's (the plan
    # reads the app's bill at a cadence); its staleness is V b / (2k) with V = $500,000
    # and b ~ 0.02 a week: $5,000 weekly, $2,500 twice weekly, so the move saves ~$2,500
    # of staleness for the projection's extra bill (~$1,740): worth it when it fits.
    projection = org.get(
        f"/api/v1/pipelines/{EMBEDDER}/projection", params={"cadences": "1,2"}
    ).json()
    at = {c["runs_per_week"]: c for c in projection["projections"]["baseline"]["cadences"]}
    extra_bill = at[2.0]["expected_bill_usd"] - at[1.0]["expected_bill_usd"]
    body = org.get(PLAN, params={"budget": ORG_BUDGET_USD, "risk": 0.1}).json()
    assert body["feasible"] and body["p_over_budget"] <= 0.1
    row = rows(body)[EMBEDDER]
    assert (row["today_runs_per_week"], row["proposed_runs_per_week"]) == (1.0, 2.0)
    assert row["bill_change_usd"] == pytest.approx(extra_bill, abs=0.01)
    assert row["staleness_change_usd"] == pytest.approx(-2500, rel=0.05)
    assert body["sentence"].startswith(
        f"With $7,000 a month at 10% risk: move {EMBEDDER} to twice weekly (+${extra_bill:,.0f}"
    )
    # The org bill is the sum of the rows' proposed expected bills.
    assert body["expected_bill_usd"] == pytest.approx(
        body["today_expected_bill_usd"] + sum(r["bill_change_usd"] for r in body["pipelines"]),
        abs=0.05,
    )
    # $1,000 less ($6,000) holds the embedder back: the p90 of the plan with it would be
    # above $6,000; the row says what the move would save and the budget it needs.
    held = org.get(PLAN, params={"budget": 6000}).json()
    row = rows(held)[EMBEDDER]
    assert row["proposed_runs_per_week"] == 1.0
    assert row["why"].startswith("held back by the budget: twice weekly would save $")
    assert body["cut_thousand"]["moves"] == [f"{EMBEDDER} to weekly"]
    assert held["next_thousand"]["moves"] == [f"{EMBEDDER} to twice weekly"]


def test_pipelines_without_a_value_curve_keep_today_and_say_what_faster_would_add(
    org: TestClient,
) -> None:
    body = org.get(PLAN, params={"budget": 100_000}).json()
    ads = rows(body)["ads-ctr"]
    assert ads["needs_evaluations"] and ads["proposed_runs_per_week"] == 2.0
    # Next faster than twice weekly is three times: 3/2 of today's expected bill, so it
    # adds half of today's.
    projection = org.get("/api/v1/pipelines/ads-ctr/projection", params={"cadences": "2,3"})
    at = {c["runs_per_week"]: c for c in projection.json()["projections"]["baseline"]["cadences"]}
    assert ads["faster_would_add_usd"] == pytest.approx(
        at[3.0]["expected_bill_usd"] - at[2.0]["expected_bill_usd"], abs=0.01
    )
    # churn-scorer's curve comes from six evaluations: thin, so re-solved at half and double.
    # Its bill and the embedder's borrow spread (their forecasts say so: fewer than 10
    # retrainings since their latest change), so their bill spread is thin too.
    said = {(s["pipeline"], s["input"]) for s in body["sensitivity"]}
    assert said == {
        ("churn-scorer", "value curve"),
        ("churn-scorer", "bill spread"),
        ("search-embedder", "bill spread"),
    }


def test_a_budget_too_small_for_any_plan_says_what_would_fit(org: TestClient) -> None:
    body = org.get(PLAN, params={"budget": 1000}).json()
    assert not body["feasible"] and body["needed_budget_usd"] > 1000
    assert "no plan fits" in body["sentence"]
    assert f"${body['needed_budget_usd']:,.0f} would fit" in body["sentence"]
    # At the budget it names, a plan fits.
    fits = org.get(PLAN, params={"budget": body["needed_budget_usd"]}).json()
    assert fits["feasible"]


def test_team_csv_and_bad_values(org: TestClient) -> None:
    team = org.get(PLAN, params={"budget": 7000, "team": "ranking-team"}).json()
    assert sorted(rows(team)) == ["recsys-ranker", EMBEDDER]
    r = org.get(PLAN + ".csv", params={"budget": 7000})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(r.text)))
    body = org.get(PLAN, params={"budget": 7000}).json()
    assert [t["pipeline"] for t in table] == [p["name"] for p in body["pipelines"]]
    assert (
        float(table[[t["pipeline"] for t in table].index(EMBEDDER)]["proposed_runs_per_week"]) == 2
    )
    for params, field in (
        ({"budget": -1}, "budget"),
        ({"budget": "lots"}, "budget"),
        ({"budget": "inf"}, "budget"),
        ({"budget": 7000, "risk": 1.5}, "risk"),
        ({"budget": 7000, "risk": 0}, "risk"),
    ):
        bad = org.get(PLAN, params=params)
        assert bad.status_code == 422, params
        assert field in [f["field"] for f in bad.json()["error"]["fields"]], bad.text


def test_without_a_budget_the_stored_org_budget_is_used(
    token_client: TestClient, db: Database
) -> None:
    _load(db)  # the demo stores $7,000 at 10%
    reader = {"Authorization": f"Bearer {make_token(db, 'read')}"}
    assert token_client.get(PLAN, headers=reader).json()["budget_usd"] == ORG_BUDGET_USD
    admin = {"Authorization": f"Bearer {make_token(db, 'admin')}"}
    r = token_client.put(
        "/api/v1/portfolio/budget", json={"budget_usd": 6000, "risk": 0.2}, headers=admin
    )
    assert r.status_code == 200, r.text
    body = token_client.get(PLAN, headers=reader).json()
    assert (body["budget_usd"], body["risk"]) == (6000, 0.2)
    # Refused: a reader, an admin limited to one pipeline, a negative budget (nothing stored).
    assert token_client.put("/api/v1/portfolio/budget", json={"budget_usd": 1, "risk": 0.1},
                            headers=reader).status_code == 403  # fmt: skip
    limited = {
        "Authorization": f"Bearer {make_token(db, 'admin', name='one', pipelines=[EMBEDDER])}"
    }
    assert token_client.put("/api/v1/portfolio/budget", json={"budget_usd": 1, "risk": 0.1},
                            headers=limited).status_code == 403  # fmt: skip
    bad = token_client.put(
        "/api/v1/portfolio/budget", json={"budget_usd": -5, "risk": 0.1}, headers=admin
    )
    assert bad.status_code == 422 and "budget_usd" in bad.text
    assert token_client.get("/api/v1/portfolio/budget", headers=reader).json()["budget_usd"] == 6000


def test_an_admin_sets_the_org_budget_in_the_browser(
    token_client: TestClient, db: Database
) -> None:
    sign_in(token_client, make_token(db, "admin", name="alice"))
    page = token_client.get("/settings/org", headers=HTML)
    assert page.status_code == 200 and "<form" in page.text
    token = csrf_value(page.text)
    bad = token_client.post("/settings/org", data={"budget_usd": "-3", "risk": "2", "csrf": token})
    assert bad.status_code == 422
    assert "Enter an amount from 0" in bad.text and "Enter a share between 0 and 1" in bad.text
    forged = token_client.post("/settings/org", data={"budget_usd": "50000", "risk": "0.1"})
    assert forged.status_code == 403
    r = token_client.post(
        "/settings/org", data={"budget_usd": "50,000", "risk": "0.05", "csrf": token}
    )
    assert r.status_code == 303 and r.headers["location"] == "/settings/org?saved=1"
    assert token_client.get("/api/v1/portfolio/budget").json() == {
        "budget_usd": 50000.0,
        "risk": 0.05,
    }


def test_the_overview_section_is_folded_until_asked_and_keeps_the_what_ifs(
    org: TestClient,
) -> None:
    folded = org.get("/", headers=HTML).text
    assert "data-plan-folded" in folded and "data-plan-sentence" not in folded
    assert 'value="7000"' in folded  # the stored org budget in the control
    opened = org.get("/", params={"plan": 1, "budget": 6000, "risk": 0.2}, headers=HTML).text
    body = org.get(PLAN, params={"budget": 6000, "risk": 0.2}).json()
    assert body["sentence"].replace("'", "&#39;") in opened
    assert 'value="6000"' in opened and 'value="0.2"' in opened
    assert opened.count("data-plan-row=") == 6
    assert "plan.csv?budget=6000&amp;risk=0.2" in opened
    assert 'href="/help#plan"' in opened and 'id="plan"' in org.get("/help").text
    assert org.get("/", params={"plan": 1, "budget": -4}, headers=HTML).status_code == 422


def test_cadence_plan_prints_markdown(org: TestClient, capsys: pytest.CaptureFixture[str]) -> None:
    namespace = args("plan", "--url", URL, "--budget", "7000", "--risk", "0.1")
    assert run_plan(namespace, transport=through(org, []), sleep=pytest.fail) == 0
    out = capsys.readouterr().out
    body = org.get(PLAN, params={"budget": 7000, "risk": 0.1}).json()
    assert out.startswith("### Cadence plan\n\n" + body["sentence"])
    assert f"| `{EMBEDDER}` | 1×/week | 2×/week | +$" in out
    assert "- $1,000 less: At $6,000:" in out
    too_small = args("plan", "--url", URL, "--budget", "100")
    assert run_plan(too_small, transport=through(org, []), sleep=pytest.fail) == 1
    bad = args("plan", "--url", URL, "--budget", "-1")
    assert run_plan(bad, transport=through(org, []), sleep=pytest.fail) == 2
    assert "--budget" in capsys.readouterr().err


def test_a_failing_gate_keeps_a_pipeline_from_going_faster(org: TestClient, db: Database) -> None:
    # Worth ten times more ($3,000,000 per unit of ndcg@10), the ranker's staleness at
    # weekly (V b / 2 = 3e6 x 0.01 / 2 = $15,000) dwarfs its bill (~$1,200): the plan
    # moves it faster. Its gate (candidate against baseline at twice weekly) passes at
    # a $1,800 budget and fails at $100 (the cost criterion): then it stays weekly. (At
    # $1,400 it no longer passes: the candidate's few runs borrow the spread they cannot
    # show, methodology.md 5.8, and its p90 bill is above $1,400.)
    admin = {"Authorization": f"Bearer {make_token(db, 'admin')}"}
    put = org.put("/api/v1/pipelines/recsys-ranker", headers=admin,
                  json={"quality_value_usd_per_unit_month": 3_000_000.0,
                        "monthly_budget_usd": 1800.0})  # fmt: skip
    assert put.status_code == 200, put.text
    fast = rows(org.get(PLAN, params={"budget": 100_000}).json())["recsys-ranker"]
    assert fast["proposed_runs_per_week"] > 1.0
    put = org.put("/api/v1/pipelines/recsys-ranker", headers=admin,
                  json={"monthly_budget_usd": 100.0})  # fmt: skip
    assert put.status_code == 200, put.text
    gate = org.get("/api/v1/pipelines/recsys-ranker/gate").json()
    assert gate["result"]["verdict"] == "FAIL"
    held = rows(org.get(PLAN, params={"budget": 100_000}).json())["recsys-ranker"]
    assert held["proposed_runs_per_week"] <= 1.0
    assert "its A/B gate does not allow faster" in held["why"]


def test_a_warm_plan_is_recalled_and_a_new_run_makes_it_again(
    org: TestClient, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each pipeline's options are made once and kept; the whole plan is recalled while
    # every key, the budget and the risk are equal. A run of one pipeline makes that
    # pipeline's options again (and the plan), not the others'.
    made = {"options": 0, "plan": 0}

    def counted(name: str, fn: Any) -> Any:
        def wrapper(*a: Any, **k: Any) -> Any:
            made[name] += 1
            return fn(*a, **k)

        return wrapper

    monkeypatch.setattr(org_service, "_options", counted("options", org_service._options))
    monkeypatch.setattr(org_service, "plan", counted("plan", org_service.plan))
    db.kept.clear()
    first = org.get(PLAN, params={"budget": 7000}).json()
    assert made == {"options": 6, "plan": 1}
    assert org.get(PLAN, params={"budget": 7000}).json() == first
    assert made == {"options": 6, "plan": 1}
    org.get(PLAN, params={"budget": 6000})  # another budget: planned again, options kept
    assert made == {"options": 6, "plan": 2}
    ingest = {"Authorization": f"Bearer {make_token(db, 'ingest')}"}
    with db.read() as s:
        prior = org_prior(s)
    run = make_run(pipeline="demand-forecast", run_id="extra", interruptions=[])
    assert org.post("/api/v1/runs", json=run, headers=ingest).status_code == 201
    with db.read() as s:
        moved = org_prior(s) != prior
    again = org.get(PLAN, params={"budget": 7000}).json()
    # The run's pipeline is made again; so are all six when the organisation's prior
    # moved (whether a forecast borrows spread, and the gates' forecasts, read it).
    assert made == {"options": 12 if moved else 7, "plan": 3}
    db.kept.clear()
    assert org.get(PLAN, params={"budget": 7000}).json() == again  # as made from scratch


def test_the_plans_thin_spread_is_the_forecasts_own_borrowing(
    org: TestClient, db: Database
) -> None:
    # Issue 39: "bill spread" is a thin input exactly when the pipeline's month forecast
    # borrows spread from the organisation and says so in its working, whatever the
    # window's length (a window after a change is shorter than the window read).
    with db.read() as s:
        briefs = pipelines.briefs(s)
        options, _, _ = org_service.options_of(s, briefs)
        said = {
            p.name: any(" to learn from: " in w for w in m.working)
            for p in briefs
            if (m := month.months(s, [p]).get(p.id)) is not None
        }
    thin = {o.name: o.thin_spread for o in options}
    assert thin == {name: said[name] for name in thin}
    assert any(thin.values()) and not all(thin.values())  # the demo has both kinds

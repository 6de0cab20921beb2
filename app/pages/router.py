from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.deps import DatabaseDep
from app.pipelines import service as pipelines
from app.web import templates

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, db: DatabaseDep) -> HTMLResponse:
    with db.transaction(write=False) as session:
        items = pipelines.list_all(session)
    return templates.TemplateResponse(request, "overview.html", {"pipelines": items})

"""Index routes: ``GET /status``, ``POST /index`` (a background re-index) and
``GET /jobs/{job_id}``; and ``POST /config/reload``."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Path, Query, params
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ragloom.server.http.errors import documented_errors
from ragloom.server.http.schemas import ConfigResponse, JobAccepted, JobResponse, StatusResponse

if TYPE_CHECKING:
    from ragloom.server.engine import ServingEngine

_JOB_LINKS: dict[str, Any] = {
    "JobProgress": {
        "operationId": "get_job",
        "parameters": {"job_id": "$response.body#/job_id"},
        "description": "Progress of the started job.",
    }
}


def router(engine: "ServingEngine", dependencies: Sequence[params.Depends]) -> APIRouter:
    """Status, re-index jobs and the configuration reload over ``engine``.

    ``POST /config/reload`` (tag ``operations``) is declared here, between ``/status`` and
    ``/index``, where it always was: the OpenAPI document lists paths in the order of the
    routes, and clients see the same document as before."""
    router = APIRouter(dependencies=dependencies)

    @router.get(
        "/status",
        tags=["index"],
        response_model=StatusResponse,
        responses=documented_errors(),
        summary="Index and engine status",
        operation_id="index_status",
    )
    def status(
        freshness: Annotated[
            bool,
            Query(
                description="Also compare the files on disk with the index (stale_files, "
                "stale): a walk of the tree, a second or so on a large repository."
            ),
        ] = False,
    ) -> dict[str, Any]:
        """Files, chunks, model, BM25 and vector readiness, the served generation, cache hit
        rates and running jobs; with ``freshness=true``, the files that differ from the index
        (without it ``stale_files`` is null: not checked)."""
        return engine.status(freshness=freshness)

    @router.post(
        "/config/reload",
        tags=["operations"],
        response_model=ConfigResponse,
        responses=documented_errors(),
        summary="Re-read the configuration and apply it live",
        operation_id="reload_config",
    )
    def reload_config() -> dict[str, Any]:
        """Re-read the repository's ragloom.toml / [tool.ragloom] and the environment; ranking,
        assembly and cache settings apply to the next request without a restart (server
        settings keep their running values). A bad configuration answers 400 with the key
        path and changes nothing."""
        return engine.reload_settings()

    @router.post(
        "/index",
        tags=["index"],
        status_code=202,
        response_model=JobAccepted,
        responses={202: {"links": _JOB_LINKS}, **documented_errors(409)},
        summary="Start an incremental re-index (background job)",
        operation_id="reindex",
    )
    def reindex() -> JSONResponse:
        """Bring the index up to date with the files on disk, in the background; queries keep
        being answered from the previous generation until the new one is published. Answers
        202 with the job id at once; while a job runs, the running job is returned."""
        job_id = engine.start_reindex()
        job = engine.job(job_id) or {"id": job_id, "state": "queued"}
        url = f"/jobs/{job_id}"
        payload = JobAccepted.model_validate(
            {"job_id": job_id, "status_url": url, "job": job}
        ).model_dump(mode="json")
        return JSONResponse(payload, status_code=202, headers={"Location": url})

    @router.get(
        "/jobs/{job_id}",
        tags=["index"],
        response_model=JobResponse,
        responses=documented_errors(404),
        summary="Progress of a background job",
        operation_id="get_job",
    )
    def job(
        job_id: str = Path(min_length=1, max_length=128, description="Id from POST /index."),
    ) -> dict[str, Any]:
        """State (queued, running, succeeded, failed), progress (phase, done, total), the index
        statistics once done, or the error."""
        found = engine.job(job_id)
        if found is None:
            raise StarletteHTTPException(404, f"no job {job_id!r}")
        return found

    return router

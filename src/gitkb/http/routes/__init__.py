"""Routes, one module per area. ``all_routers()`` is what ``create_app`` mounts."""

from __future__ import annotations

from fastapi import APIRouter

from gitkb.http.routes import (
    actions,
    documents,
    health,
    indexes,
    jobs,
    knowledge,
    proposals,
    reviews,
    search,
    sources,
    webhooks,
)


def all_routers() -> list[APIRouter]:
    return [
        health.router,
        actions.router,
        indexes.router,
        documents.router,
        search.router,
        jobs.router,
        sources.router,
        proposals.router,
        reviews.router,
        knowledge.router,
        webhooks.router,
    ]

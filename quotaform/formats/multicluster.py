"""The JSON report of ``plan --all-clusters --output json``."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from quotaform.formats.base import FROZEN
from quotaform.formats.plan import PlanDocument, plan_document
from quotaform.plan.multicluster import MultiClusterPlan

__all__ = [
    "MULTI_CLUSTER_FORMAT_VERSION",
    "ClusterErrorDoc",
    "MultiClusterDocument",
    "render_multi_json",
]

#: Version of the ``plan --all-clusters -o json`` document.
MULTI_CLUSTER_FORMAT_VERSION = 1


class ClusterErrorDoc(BaseModel):
    """A cluster whose plan could not be made."""

    model_config = FROZEN
    error: str = Field(description="Why: the error message, as the CLI prints it.")


class MultiClusterDocument(BaseModel):
    """``plan --all-clusters --output json``."""

    model_config = FROZEN
    format_version: Literal[1] = Field(description="Version of this format.")
    clusters: dict[str, PlanDocument | ClusterErrorDoc] = Field(
        description="Cluster name -> its plan document (as `plan -o json` prints it) "
        "or its error; sorted by name."
    )


def render_multi_json(report: MultiClusterPlan) -> str:
    """``{"format_version": 1, "clusters": {name: plan document | {"error": ...}}}``,
    deterministic (2-space indent, trailing newline)."""
    clusters: dict[str, object] = {}
    for result in report.clusters:
        if result.plan is not None and result.review is not None:
            clusters[result.cluster] = plan_document(result.plan, result.review).model_dump(
                mode="json", by_alias=True
            )
        else:
            clusters[result.cluster] = {"error": result.error}
    doc = {"format_version": MULTI_CLUSTER_FORMAT_VERSION, "clusters": clusters}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"

"""Manifest side of quotaform: YAML files -> validated :class:`~quotaform.desired.DesiredState`.

``models`` holds the pydantic models of one document (the only place pydantic is
used), ``loader`` reads files and checks the set as a whole, ``schema`` renders
the models as the JSON Schema in ``schemas/manifest.schema.json``.
"""

from quotaform.manifest.loader import (
    ManifestError,
    ManifestProblem,
    load_manifests,
    manifest_clusters,
)
from quotaform.manifest.models import API_VERSION, KIND, ManifestDocument

__all__ = [
    "API_VERSION",
    "KIND",
    "ManifestDocument",
    "ManifestError",
    "ManifestProblem",
    "load_manifests",
    "manifest_clusters",
]

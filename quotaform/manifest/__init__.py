"""Manifests in: YAML files -> a validated :class:`~quotaform.plan.state.DesiredState`.

``files`` finds the files of a set, ``yamlsource`` reads YAML with line
numbers, ``models`` holds the pydantic models of one document (the only place
pydantic validates manifests), ``documents`` validates one document, ``loader``
checks the set as a whole, ``schema`` renders the models as
``schemas/manifest.schema.json``.
"""

from quotaform.errors import ManifestError, ManifestProblem
from quotaform.manifest.loader import load_manifests, manifest_clusters

__all__ = ["ManifestError", "ManifestProblem", "load_manifests", "manifest_clusters"]

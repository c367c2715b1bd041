"""Edit a manifest set in place: append entities to one file and update
declared values in the files declaring them, keeping comments, order and
quoting; then load the set again and put every file back if it no longer
loads. Used by ``import`` and ``analyze recommend --write-into``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from quotaform.errors import ExportError, ManifestError
from quotaform.export.edit import (
    ManifestFile,
    add_entities,
    manifest_yaml,
    target_document,
    update_entities,
)
from quotaform.export.files import replace_file
from quotaform.inputs.files import read_bytes
from quotaform.inputs.limits import LIMITS
from quotaform.kafka.entity import Entity
from quotaform.manifest import load_manifests
from quotaform.manifest.models import API_VERSION, KIND
from quotaform.plan.state import DesiredState

__all__ = ["edit_manifest_set", "new_manifest_file"]


def new_manifest_file(path: Path, *, cluster: str, cluster_id: str | None) -> ManifestFile:
    """A manifest file not yet on disk: one ClientQuotas document for
    ``cluster`` with an empty ``spec.quotas`` and no scope of its own (the
    set's other documents declare it), for new entries to be appended to."""
    metadata = CommentedMap(cluster=cluster)
    if cluster_id is not None:
        metadata["clusterId"] = cluster_id
    spec = CommentedMap()
    spec["quotas"] = CommentedSeq()
    document = CommentedMap()
    document["apiVersion"] = API_VERSION
    document["kind"] = KIND
    document["metadata"] = metadata
    document["spec"] = spec
    return ManifestFile(path, "", [document], False, True, manifest_yaml())


def edit_manifest_set(
    paths: Sequence[str | Path],
    desired: DesiredState,
    *,
    into: Path,
    add: Mapping[Entity, Mapping[str, float]],
    update: Mapping[Entity, Mapping[str, float]],
    comment: str,
    cluster: str | None = None,
) -> tuple[tuple[Entity, ...], tuple[tuple[Entity, str], ...], tuple[str, ...]]:
    """Append ``add`` to ``into`` (after ``comment``) and overwrite the values
    of ``update`` (declared entities) in the files declaring them, keeping
    comments, order and quoting; then load the set again and restore every
    file if it would not load.

    Returns:
        ``(added, (updated entity, file), reformatted files)``, sorted.

    ``into`` may be a new file (one the set would read: see
    :func:`~quotaform.manifest.files.is_member`): it is created with one
    document for the set's cluster (:func:`new_manifest_file`) when there is
    something to add.

    Raises:
        ExportError: ``into`` has no document to add to; the edited set would
            not load (files restored, a created file removed).
    """
    files: dict[Path, ManifestFile] = {}
    edited: dict[Path, ManifestFile] = {}

    def file(path: Path) -> ManifestFile:
        key = path.resolve()
        if key not in files:
            files[key] = (
                new_manifest_file(path, cluster=desired.cluster, cluster_id=desired.cluster_id)
                if path == into and not path.exists()
                else ManifestFile.read(path)
            )
        return files[key]

    added: list[Entity] = []
    if add:
        target = target_document(file(into).documents)
        if target is None:
            raise ExportError(f"{into} has no document with spec.quotas or spec.scope to add to")
        added = add_entities(target, add, comment=comment)
        if added:
            edited[into.resolve()] = file(into)
    updated: list[tuple[Entity, str]] = []
    by_file: dict[str, dict[Entity, Mapping[str, float]]] = {}
    for entity, quotas in update.items():
        by_file.setdefault(desired.entities[entity].source.path, {})[entity] = quotas
    for path, entities in sorted(by_file.items()):
        manifest = file(Path(path))
        for document in manifest.documents:
            if isinstance(document, CommentedMap):
                done = update_entities(document, entities)
                updated.extend((e, path) for e in done)
                if done:
                    edited[manifest.path.resolve()] = manifest
    updated.sort(key=lambda pair: pair[0].sort_key())
    changed = list(edited.values())
    _write_checked(changed, paths, cluster)
    return (
        tuple(added),
        tuple(updated),
        tuple(str(f.path) for f in changed if not f.keeps_format),
    )


def _write_checked(
    changed: Sequence[ManifestFile], paths: Sequence[str | Path], cluster: str | None
) -> None:
    """Write the edited files, then load the set; restore them all if it fails."""
    if not changed:
        return
    originals = {
        f.path: read_bytes(f.path, LIMITS["manifest"]) for f in changed if f.path.exists()
    }
    created = [f.path for f in changed if f.path not in originals]
    try:
        for f in changed:
            replace_file(f.path, f.text())
        load_manifests(paths, cluster=cluster)
    except (ManifestError, ExportError) as exc:
        for path, content in originals.items():
            replace_file(path, content.decode("utf-8"))
        for path in created:
            path.unlink(missing_ok=True)
        raise ExportError(
            f"the edited manifests would not load, so nothing was changed:\n{exc}"
        ) from None

"""The two workflows the CLI runs: :func:`export_manifest` (live quotas into a
new manifest) and :func:`import_entities` (live entities into an existing
manifest set). Both read the cluster through a client the caller opened
(read-only is enough)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

from ruamel.yaml.comments import CommentedMap

from quotaform.cluster.connect import check_cluster
from quotaform.cluster.read import ClusterReader, read_live_state
from quotaform.errors import ExportError, ManifestError
from quotaform.export.build import (
    Skipped,
    export_header,
    manifest_document,
    split_exportable,
)
from quotaform.export.edit import (
    ManifestFile,
    add_entities,
    dump_documents,
    manifest_yaml,
    target_document,
    update_entities,
)
from quotaform.export.files import replace_file
from quotaform.kafka.entity import Entity
from quotaform.kafka.units import same_quotas
from quotaform.manifest import load_manifests
from quotaform.manifest.files import is_member
from quotaform.plan.state import DesiredState, Scope

__all__ = [
    "IMPORT_COMMENT",
    "ExportResult",
    "ImportResult",
    "edit_manifest_set",
    "export_manifest",
    "import_entities",
]

#: The comment above each entry ``import`` adds; ``{date}`` is an ISO date.
IMPORT_COMMENT = "imported from the live cluster {date}"


@dataclass(frozen=True, slots=True)
class ExportResult:
    """What :func:`export_manifest` produced.

    Attributes:
        text: the manifest, YAML.
        entities: the entities written, sorted.
        skipped: live entities in scope left out, with the reason.
        cluster_id: the live cluster's id.
    """

    text: str
    entities: tuple[Entity, ...]
    skipped: tuple[Skipped, ...]
    cluster_id: str


def export_manifest(
    client: ClusterReader,
    *,
    cluster: str,
    scope: Scope,
    bootstrap: str,
    pin_cluster_id: bool = False,
    exported_at: datetime | None = None,
) -> ExportResult:
    """Describe the live quotas in ``scope`` and render them as one manifest.

    Args:
        client: a connected client (read-only is enough).
        cluster: ``metadata.cluster`` of the manifest.
        scope: what to export; also written as ``spec.scope``.
        bootstrap: the bootstrap address, named in the header comment.
        pin_cluster_id: write the live cluster id as ``metadata.clusterId``.
        exported_at: the time in the header (default: now).

    Raises:
        BrokerError: a describe failed.
    """
    cluster_id = client.cluster_id()
    live = read_live_state(client, scope, cluster_id=cluster_id, count_unmanaged=False)
    kept, skipped = split_exportable(live.entities)
    header = export_header(
        exported_at=exported_at or datetime.now(UTC),
        bootstrap=bootstrap,
        cluster_id=cluster_id,
        scope=scope,
        count=len(kept),
        skipped=skipped,
    )
    document = manifest_document(
        kept,
        cluster=cluster,
        cluster_id=cluster_id if pin_cluster_id else None,
        scope=scope,
        header=header,
    )
    return ExportResult(
        dump_documents(manifest_yaml(), [document]), tuple(kept), skipped, cluster_id
    )


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What :func:`import_entities` changed.

    Attributes:
        into: the file new entries went to.
        added: entities appended to ``into``, sorted.
        updated: ``(entity, file)`` whose declared values were replaced by the
            live ones (``--update``), sorted by entity.
        skipped: live entities in scope that no manifest could reproduce.
        reformatted: written files whose layout ruamel could not keep byte for
            byte (other than the edit itself).
    """

    into: Path
    added: tuple[Entity, ...]
    updated: tuple[tuple[Entity, str], ...]
    skipped: tuple[Skipped, ...]
    reformatted: tuple[str, ...]

    @property
    def changed(self) -> bool:
        """Whether any file was written."""
        return bool(self.added or self.updated)


def import_entities(
    paths: Sequence[str | Path],
    client: ClusterReader,
    *,
    into: Path,
    update: bool = False,
    cluster: str | None = None,
    desired: DesiredState | None = None,
    today: date | None = None,
) -> ImportResult:
    """Declare live entities the manifests at ``paths`` do not: append them to
    ``into`` (one of the set's files) and, with ``update``, overwrite declared
    values that differ from live in the files that declare them.

    ``cluster`` selects the documents of a multi-cluster set (as
    ``load_manifests(paths, cluster=...)``); ``desired`` is that set already
    loaded, when the caller has it.

    Edited files keep their comments, key order and quoting. After writing,
    the whole set is loaded again; if it no longer loads, every file is put back
    as it was and the error is raised.

    Raises:
        ExportError: ``into`` is not read by ``load_manifests(paths)`` or has no
            document with ``spec.quotas`` or ``spec.scope``; the edited set
            would not load (files restored).
        ManifestError: the manifests are invalid before any edit.
        ClusterMismatchError: the manifests name another cluster id.
        BrokerError: a describe failed.
    """
    if not into.is_file() or not is_member(into, paths):
        raise ExportError(
            f"{into} is not one of the manifest files given ({', '.join(map(str, paths))}): "
            "import edits a file of the set, so the result is checked as one"
        )
    if desired is None:
        desired = load_manifests(paths, cluster=cluster)
    check_cluster(desired, client)
    live = read_live_state(client, desired.scope, count_unmanaged=False)
    kept, skipped = split_exportable(live.entities)
    missing = {e: q for e, q in kept.items() if e not in desired.entities}
    drifted = {}
    if update:
        drifted = {
            e: q
            for e, q in kept.items()
            if e in desired.entities and not same_quotas(desired.entities[e].quotas, q)
        }

    comment = IMPORT_COMMENT.format(date=(today or datetime.now(UTC).date()).isoformat())
    added, updated, reformatted = edit_manifest_set(
        paths, desired, into=into, add=missing, update=drifted, comment=comment, cluster=cluster
    )
    return ImportResult(
        into=into,
        added=added,
        updated=updated,
        skipped=skipped,
        reformatted=reformatted,
    )


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

    Raises:
        ExportError: ``into`` has no document to add to; the edited set would
            not load (files restored).
    """
    files: dict[Path, ManifestFile] = {}
    edited: dict[Path, ManifestFile] = {}

    def file(path: Path) -> ManifestFile:
        key = path.resolve()
        if key not in files:
            files[key] = ManifestFile.read(path)
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
    originals = {f.path: f.path.read_bytes() for f in changed}
    try:
        for f in changed:
            replace_file(f.path, f.text())
        load_manifests(paths, cluster=cluster)
    except (ManifestError, ExportError) as exc:
        for path, content in originals.items():
            replace_file(path, content.decode("utf-8"))
        raise ExportError(
            f"the edited manifests would not load, so nothing was changed:\n{exc}"
        ) from None

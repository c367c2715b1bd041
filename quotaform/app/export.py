"""``quotaform export`` and ``quotaform import``: live quotas into manifests.

:func:`run_export` and :func:`run_import` take one request and return one
result; the steps under them, :func:`export_manifest` (live quotas into a
new manifest) and :func:`import_entities` (live entities into an existing
manifest set), read the cluster through a client the caller opened
(read-only is enough)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

from quotaform.app.common import ConnectionOptions, View, load_and_target, target
from quotaform.cluster.connect import check_cluster, connect
from quotaform.cluster.read import ClusterReader, read_live_state
from quotaform.errors import ExportError
from quotaform.export.build import (
    Skipped,
    export_header,
    export_scope,
    manifest_document,
    parse_prefixes,
    split_exportable,
)
from quotaform.export.edit import dump_documents, manifest_yaml
from quotaform.export.files import write_new_file
from quotaform.export.manifest_set import edit_manifest_set
from quotaform.kafka.entity import SHAPE_NAMES, Entity
from quotaform.kafka.units import same_quotas
from quotaform.manifest import load_manifests
from quotaform.manifest.files import is_member
from quotaform.plan.state import DesiredState, Scope

__all__ = [
    "IMPORT_COMMENT",
    "ExportRequest",
    "ExportResult",
    "ExportRun",
    "ImportRequest",
    "ImportResult",
    "export_manifest",
    "import_entities",
    "run_export",
    "run_import",
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


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """One ``quotaform export`` run.

    Attributes:
        cluster_name: ``metadata.cluster`` of the manifest (default: the
            ``--cluster`` name).
        shapes: entity shapes to export (empty: all four), as in ``spec.scope``.
        prefixes: ``TYPE=PREFIX`` filters (written into ``spec.scope``).
        include_defaults: export and own default entities.
        pin_cluster_id: write the live cluster id as ``metadata.clusterId``.
        out: the file to write (``None``: the text is returned only).
        force: overwrite ``out`` when it exists.
        connection: where to connect (read-only).
        view: warnings.
    """

    cluster_name: str | None = None
    shapes: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    include_defaults: bool = True
    pin_cluster_id: bool = False
    out: Path | None = None
    force: bool = False
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    view: View = field(default_factory=View)


@dataclass(frozen=True, slots=True)
class ExportRun:
    """The export and where it went (``written_to`` ``None``: not written,
    the caller prints ``result.text``); ``scope`` in words."""

    result: ExportResult
    scope: str
    written_to: Path | None


def run_export(request: ExportRequest) -> ExportRun:
    """Check the options (before connecting), describe the live quotas in
    scope read-only, and write the manifest to ``out`` when given.

    Raises:
        ExportError: no cluster name, bad shapes or prefixes, ``out`` exists
            without ``force``.
        ClusterConfigError, ConnectionSettingsError, BrokerError: as the
            connection and describes raise them.
    """
    name = request.cluster_name or request.connection.cluster
    if name is None:
        raise ExportError(
            "name the cluster the manifest is for: --cluster-name NAME (metadata.cluster), "
            "or --cluster NAME to connect with its profile too"
        )
    scope = export_scope(
        list(request.shapes or SHAPE_NAMES),
        parse_prefixes(list(request.prefixes)),
        include_defaults=request.include_defaults,
    )
    out = request.out
    if out is not None and out.exists() and not request.force:
        raise ExportError(f"{out} already exists: pass --force to overwrite it")
    where = target(request.connection, request.view, implied=name)
    settings = where.settings
    with connect(settings, read_only=True, cluster_id=where.cluster_id) as client:
        result = export_manifest(
            client,
            cluster=name,
            scope=scope,
            bootstrap=settings.bootstrap_servers,
            pin_cluster_id=request.pin_cluster_id,
        )
    if out is not None:
        write_new_file(out, result.text, force=request.force)
    return ExportRun(result, str(scope), out)


@dataclass(frozen=True, slots=True)
class ImportRequest:
    """One ``quotaform import`` run.

    Attributes:
        manifests: the manifest set (files or directories).
        into: the file of the set new entries are appended to.
        update: also overwrite declared values that differ from live.
        connection: where to connect (read-only).
        view: warnings.
    """

    manifests: tuple[Path, ...]
    into: Path
    update: bool = False
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    view: View = field(default_factory=View)


def run_import(request: ImportRequest) -> ImportResult:
    """Load the set, connect read-only and :func:`import_entities`.

    Raises:
        as :func:`import_entities`, and ClusterConfigError /
        ConnectionSettingsError before connecting.
    """
    desired, where = load_and_target(request.manifests, request.connection, request.view)
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        return import_entities(
            request.manifests,
            client,
            into=request.into,
            update=request.update,
            cluster=request.connection.cluster,
            desired=desired,
        )

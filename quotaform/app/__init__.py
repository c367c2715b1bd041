"""The application layer: one module per command, each a function taking one
frozen request value and returning one result value, never printing.

``plan`` (:mod:`~quotaform.app.plan`), ``apply``, ``drift``, ``explain``,
``export`` / ``import``, ``storage``, ``analyze`` / ``snapshot``,
``describe``, ``unlock`` and ``validate``: each runs its sequence (load the
manifests, connect, read, plan, confirm, apply) over the layers below, with
where to connect in one :class:`~quotaform.app.common.ConnectionOptions` and
what it says while running in an injected :class:`~quotaform.app.common.View`.
The command line (:mod:`quotaform.cli`) is the only layer above; nothing
below imports this package (``pyproject.toml``'s import contracts).
"""

"""Live quotas back into manifests: ``quotaform export`` and ``quotaform import``.

``build`` (pure: live quotas -> round-trip YAML nodes), ``edit`` (editing
manifest files, keeping comments and layout), ``files`` (safe writes),
``workflow`` (the two commands' steps).
"""

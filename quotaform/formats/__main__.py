"""``python -m quotaform.formats [DIR]``: rewrite the JSON Schemas (default ``schemas/``)."""

from quotaform.formats.schemas import main

raise SystemExit(main())

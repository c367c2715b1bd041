"""``python -m quotaform``."""

from quotaform.cli.app import main

main()

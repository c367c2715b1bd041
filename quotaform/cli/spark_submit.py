"""The Spark job as a ``spark-submit`` application: ``quotaform analyze`` on
the cluster spark-submit names.

::

    spark-submit --master "$SPARK_MASTER_URL" "$(python -m quotaform.cli.spark_submit --path)" \\
        utilisation manifests/ --usage s3a://bucket/usage/ --out s3a://bucket/out/

The arguments are ``quotaform analyze``'s (``utilisation``, ``impact`` or
``recommend`` and their options), the outputs and the exit codes are the
CLI's (0 done, 1 error with one ``Error:`` line on stderr); the engine is
Spark on the master spark-submit gives (``--engine python`` and ``--master``
are refused: spark-submit decides where the job runs). quotaform must be
installed on the driver and the executors (``PYSPARK_PYTHON``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main", "submit_arguments"]

#: The analyses spark-submit runs.
COMMANDS = ("utilisation", "impact", "recommend")


def submit_arguments(argv: Sequence[str]) -> list[str]:
    """``quotaform`` CLI arguments for one submitted run: ``analyze``, then
    ``argv`` with ``--engine spark`` added unless given.

    Raises:
        SystemExit: (2, with a message) no analysis named, or an option that
            contradicts spark-submit (``--engine python``, ``--master``,
            ``--remote``).
    """
    args = list(argv)
    if not args or args[0] not in COMMANDS:
        sys.stderr.write(
            f"Error: name the analysis first: {' | '.join(COMMANDS)} "
            "(then quotaform analyze's arguments)\n"
        )
        raise SystemExit(2)
    for given in args:
        name = given.split("=", 1)[0]
        if name in ("--master", "--remote"):
            sys.stderr.write(
                f"Error: {name}: spark-submit decides where the job runs (its --master)\n"
            )
            raise SystemExit(2)
    if "--engine" in args or any(a.startswith("--engine=") for a in args):
        engine = next(
            (a.split("=", 1)[1] for a in args if a.startswith("--engine=")),
            args[args.index("--engine") + 1] if "--engine" in args[:-1] else "",
        )
        if engine != "spark":
            sys.stderr.write(f"Error: --engine {engine}: spark-submit runs the Spark engine\n")
            raise SystemExit(2)
    else:
        args += ["--engine", "spark"]
    return ["analyze", *args]


def main(argv: Sequence[str] | None = None) -> None:
    """Run one submitted analysis (``--path``: print this file's path, the
    application spark-submit takes)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--path"]:
        print(Path(__file__).resolve())
        return
    from quotaform.cli.app import main as cli_main

    cli_main(submit_arguments(args))


if __name__ == "__main__":
    # spark-submit runs this file as a script: its folder is sys.path[0], where
    # the CLI's own modules would shadow same-named top-level ones.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        del sys.path[0]
    main()

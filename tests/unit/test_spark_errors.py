"""A Spark failure is one line naming where Spark ran: a Python worker's
error by its own last line, a worker without quotaform by what to install."""

from __future__ import annotations

from pyspark.errors import PythonException

from quotaform.analytics.spark.session import spark_error

_WORKER = (
    "An exception was thrown from the Python worker. Please see the stack trace below.\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/spark/python/lib/pyspark.zip/pyspark/worker.py", line 1, in main\n'
    "{last}\n"
)


def test_a_worker_without_quotaform_says_what_to_install() -> None:
    exc = PythonException(
        message=_WORKER.format(last="ModuleNotFoundError: No module named 'quotaform'")
    )
    error = spark_error(exc, master="spark://127.0.0.1:7077", remote=None)
    assert error is not None
    assert str(error) == (
        "Spark on spark://127.0.0.1:7077: the Spark workers' Python cannot import quotaform: "
        "the utilisation is aggregated there, so install quotaform[spark] in the executors' "
        "Python (PYSPARK_PYTHON; over Spark Connect, the server's)"
    )
    assert "\n" not in str(error)


def test_a_worker_error_is_its_last_line() -> None:
    last = "quotaform.errors.AnalyticsError: the engines' checks disagree"
    error = spark_error(
        PythonException(message=_WORKER.format(last=last)), master=None, remote=None
    )
    assert str(error) == f"Spark on local[*]: PythonException: {last}"

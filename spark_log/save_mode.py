"""Batch writes with Spark's default save mode, as with ``format("kafka")``.

``df.write.format("kafka").save()`` works without ``.mode(...)``: the Kafka sink takes Spark's
default mode, ErrorIfExists, to mean "append" (a log has no "exists"), and refuses only Overwrite
and Ignore. Spark 4.x refuses ErrorIfExists (and Ignore) for every Python data source before the
source is asked (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``), so the same line with ``"pylog"`` would
fail, and switching connectors would take more than one word.

``install()`` (called by ``spark_log.register``) wraps ``DataFrameWriter.format``, ``mode`` and
``save`` of classic PySpark so that a writer whose format is ``pylog`` and whose mode is
ErrorIfExists (Spark's default, or ``"error"``/``"errorifexists"`` given explicitly) saves in
Append mode instead. Nothing else changes: other formats, and ``pylog`` with Overwrite or Ignore,
reach Spark exactly as written (pylog refuses Overwrite naming the mode; Spark refuses Ignore).
The wrapper keeps two attributes on the Python writer object, because the JVM writer's source and
mode are private.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install", "FORMAT"]

FORMAT = "pylog"
_ERROR_IF_EXISTS = frozenset({"error", "errorifexists", "default"})  # Spark's spellings


def install() -> bool:
    """Wrap classic PySpark's ``DataFrameWriter`` once per process; True if this call did it."""
    from pyspark.sql.readwriter import DataFrameWriter

    if getattr(DataFrameWriter, "_pylog_save_mode", False):
        return False
    original_format = DataFrameWriter.format
    original_mode = DataFrameWriter.mode
    original_save = DataFrameWriter.save

    def format(self, source: str):  # noqa: A001 - the name Spark users call
        self._pylog_format = isinstance(source, str) and source.strip().lower() == FORMAT
        return original_format(self, source)

    def mode(self, saveMode):  # noqa: N803 - PySpark's parameter name
        if isinstance(saveMode, str):
            self._pylog_mode = saveMode.strip().lower()
        return original_mode(self, saveMode)

    def save(self, path=None, format=None, mode=None, partitionBy=None, **options: Any):  # noqa: A002
        if format is not None:
            self.format(format)
        if mode is not None:
            self.mode(mode)
        if getattr(self, "_pylog_format", False) and getattr(self, "_pylog_mode", "errorifexists") in _ERROR_IF_EXISTS:
            original_mode(self, "append")
        return original_save(self, path, None, None, partitionBy, **options)

    format.__doc__, mode.__doc__, save.__doc__ = original_format.__doc__, original_mode.__doc__, original_save.__doc__
    DataFrameWriter.format, DataFrameWriter.mode, DataFrameWriter.save = format, mode, save
    DataFrameWriter._pylog_save_mode = True
    return True

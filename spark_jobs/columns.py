"""The pyspark.sql.functions and Window of a DataFrame's kind: classic pyspark's for a driver in this process,
Spark Connect's for a session on a server.

pyspark.sql.functions builds a classic Column (which needs this process's SparkContext) unless the whole process
was switched to Spark Connect, and spark_jobs.session keeps that switch off, so that a process may hold both kinds
of session (the tests do). Every job therefore builds its columns with the module of the DataFrame it works on.
"""
from types import ModuleType

from pyspark.sql import DataFrame, SparkSession


def functions(of: DataFrame | SparkSession) -> ModuleType:
    """pyspark.sql.functions, or pyspark.sql.connect.functions for a Spark Connect DataFrame or session."""
    if _is_connect(of):
        from pyspark.sql.connect import functions as connect_functions
        return connect_functions
    from pyspark.sql import functions as classic_functions
    return classic_functions


def window(of: DataFrame | SparkSession) -> type:
    """pyspark.sql.Window, or Spark Connect's, for windows over `of`'s columns."""
    if _is_connect(of):
        from pyspark.sql.connect.window import Window as ConnectWindow
        return ConnectWindow
    from pyspark.sql.classic.window import Window as ClassicWindow
    return ClassicWindow


def _is_connect(of: DataFrame | SparkSession) -> bool:
    session = of.sparkSession if isinstance(of, DataFrame) else of  # Connect's session is no SparkSession
    return type(session).__module__.startswith("pyspark.sql.connect")

"""Registers the ``headwater`` format for every Spark session, including Scala, Java and SQL ones.

Spark looks for Python data sources at start-up: it imports every top-level module whose name
starts with ``pyspark_`` from the Python its workers run, and registers the ``DefaultSource``
each one defines under that source's ``name()``. Installing ``headwater[spark]`` into that
Python (or shipping it in the executors' packed environment) is therefore enough for
``spark.read.format("headwater")`` in Scala, ``CREATE TABLE ... USING headwater`` in SQL, or
``spark.read().format("headwater")`` in Java, with no ``spark.dataSource.register`` call.
"""

from headwater_spark.source import HeadwaterDataSource

DefaultSource = HeadwaterDataSource

__all__ = ["DefaultSource"]

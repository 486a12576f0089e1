"""Spark side of Headwater: the ``headwater`` PySpark data source and the payload validation job."""

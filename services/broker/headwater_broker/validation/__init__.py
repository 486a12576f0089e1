"""Record validation at the produce door: every record of a batch checked before it is stored.

Broker-only (the client package never validates what it encoded itself):

- ``records.py`` -- ``validate_records``: decompress a batch (within the cap) and walk every
  record; sections whose records share one layout take the fast paths below.
- ``uniform.py`` -- records of one layout checked column by column in C calls.
- ``columnar.py`` -- other sections of many records, column-wise with numpy.
"""

"""The cluster layer: shared metadata in SQL, broker sessions, the metadata image, the controller.

Design: docs/cluster.md. Layers, bottom up (each module's docstring names its seam)::

    tables.py        the SQL tables (SQLite file or PostgreSQL)
    store.py         engine, transactions, database clock; elections, leases, the change log,
                     controller writes (epoch compare-and-set), snapshots
    state.py         typed entities and epochs; changes.py  change rows and controller mutations
    image.py         the immutable MetadataImage and its pure apply(changes) -> (image, events)
    metadata_follower.py  keeps one broker's image current from the log; listeners get events
    session.py       broker registration (incarnation, broker epoch), heartbeats, release
    producer_ids.py  cluster-wide producer id blocks and producer epoch compare-and-set
    liveness.py      pure: fence / unfence / record registrations
    election.py      pure: leader election, ISR cleanup, reassignment, ISR proposals
    placement.py     pure: replica placement (balanced, rack-aware)
    lease.py         one broker's hold on the controller lease
    controller.py    the controller: reconcile loop and admin operations, one transaction each
    node.py          ClusterNode: what the broker wires in (start / stop / image / controller)
    standalone.py    a node without a broker, as a process (fault tests, trying the controller)

Topic configs, the replication ones included, are validated by ``headwater_broker.topic_config``.

Threading policy: SQL runs only on each store's own small thread pool (``MetadataStore.call``);
nothing blocks the event loop, and metadata calls never queue behind disk work on the loop's
default executor. Everything else -- the image swap, listeners, the controller's decisions --
runs on the event loop's thread, so an image is never seen half-applied. Nothing in this package
imports FastAPI.
"""

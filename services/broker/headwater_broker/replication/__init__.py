"""Replication between the replicas of a partition (docs/cluster.md, "Replication").

Framework-free: these modules know partition logs and asyncio (and the controller's pure
proposal type), not HTTP routes or the metadata store, so they are tested against real log
directories on their own. The broker wires them: its roles (``headwater_broker.roles``) create
a :class:`~.leader.PartitionLeader` when it becomes a partition's leader and a
:class:`~.follower.FollowerPartition` when it follows one, recorded in the partition registry;
a route serves ``POST /replication/fetch`` with :func:`~.leader.answer_fetch`, and fetcher
tasks send the requests and apply the answers.

- ``wire.py`` -- the replica-fetch request (JSON) and answer
  (``application/vnd.headwater.replica-fetch``: a length-prefixed JSON table, then raw batches).
- ``leader.py`` -- the leader's side: epoch checks, divergence, reads up to the log end, each
  follower's fetch state, the in-sync set (proposals as data) and the high watermark; and
  ``answer_fetch``, the route's answer without a web framework.
- ``follower.py`` -- the follower's side: truncation on divergence, appends as the leader stored
  them, the high watermark learnt from the leader.
- ``fetcher.py`` -- a follower's fetcher task per leader broker (long-polls, applies, backs off).
- ``link.py`` -- the fetcher's one kept-alive HTTP/1.1 connection to its leader.
- ``acks.py`` -- ``acks=all``: waits answered when the high watermark passes a batch, failed on
  leadership loss, timeout or a too small in-sync set.
"""

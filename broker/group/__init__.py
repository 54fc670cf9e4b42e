"""Groups: Kafka's group coordinator (classic, consumer and streams groups) and durable
committed offsets.

- ``state``: the classic group state machine (with the state x API table), members, protocol
  votes;
- ``rebalance`` / ``membership`` / ``coordinator``: ``GroupCoordinator`` (JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup, offsets, admin APIs, start-up replay, offset expiry);
- ``offset_metadata_manager``: committed and pending transactional offsets (Kafka's
  ``OffsetMetadataManager``); ``offsets``: committed offsets in memory and the records that
  persist them; ``metadata_log``: the coordinator's writes to ``__consumer_offsets``;
- ``consumer`` (KIP-848) and ``streams`` (KIP-1071): the heartbeat protocols beside the classic
  one; ``modern``: what those two share;
- ``config``: the coordinator's settings; ``results``: the values it answers; ``wire``: what
  the group handlers share; ``timer``: keyed timers on the event loop; ``service``: the
  coordinator on the broker's storage (``group_coordinator``).

The record layouts of ``__consumer_offsets`` are ``protocol/internal_topics/consumer_offsets.py``
(classic) and the ``records`` modules of ``consumer``, ``streams`` and ``broker/share``; the
coordinator's log is ``broker/coordinator/log.py``. The wire handlers are
``broker/handlers/{find_coordinator,join_group,sync_group,heartbeat,leave_group,offset_commit,
offset_fetch,txn_offset_commit,list_groups,describe_groups,delete_groups,offset_delete,
consumer_group_heartbeat,consumer_group_describe,streams_group_heartbeat,
streams_group_describe}.py``.
"""

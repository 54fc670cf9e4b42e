"""Consumer groups: Kafka's classic group coordinator and durable committed offsets.

- ``state``: the group state machine (with the state x API table), members, protocol votes;
- ``rebalance`` / ``membership`` / ``coordinator``: ``GroupCoordinator`` (JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup, offsets, admin APIs, start-up replay, offset expiry);
- ``schemas``: Kafka's ``__consumer_offsets`` key/value schemas and the group -> partition hash;
- ``offsets``: committed offsets in memory and the records that persist them;
- ``log``: what the coordinator needs from storage (``CoordinatorLog``), an in-memory log for
  tests; ``service``: the coordinator on the broker's storage (``group_coordinator``);
- ``timer``: keyed timers on the event loop and a manual clock for tests.

The wire handlers are ``broker/handlers/{find_coordinator,join_group,sync_group,heartbeat,
leave_group,offset_commit,offset_fetch,list_groups,describe_groups,delete_groups,
offset_delete}.py``.
"""

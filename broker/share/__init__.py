"""Share groups (KIP-932): a share coordinator beside the group and transaction coordinators.

``groups``: membership, epochs and the assignment (ShareGroupHeartbeat); ``partition``: the
share-partition state machine (in-flight records, acquisition locks, delivery counts);
``sessions``: share sessions and their epochs; ``reader``: reading a partition's batches for
ShareFetch; ``coordinator``: ShareFetch and ShareAcknowledge over those; ``persister``: the
state in ``__share_group_state``; ``service.share_coordinator`` builds it all on the broker's
storage (``broker/coordinators.py`` wires it in).
"""

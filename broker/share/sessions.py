"""Share sessions (KIP-932): the partitions a member fetches, and the session epoch.

As Kafka's ``ShareSessionCache``: ShareFetch with epoch 0 opens a session (the partitions of
the request), later requests carry the next epoch (1, 2, ... wrapping to 1) and add partitions
or forget them (``ForgottenTopicsData``); epoch -1 closes the session, and so does the close of
the connection of the session's last request. ShareAcknowledge uses the session's epoch too,
but never opens one.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

__all__ = ("ShareSession", "ShareSessions")

TopicIdPartition = tuple[uuid.UUID, int]
_MAX_EPOCH = 2**31 - 1


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    #: the epoch the next request must carry
    epoch: int = 1
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)
    #: (host, port) of the client connection of the session's last request
    connection: tuple[str, int] | None = None


class ShareSessions:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open(self, group_id: str, member_id: str) -> tuple[ShareSession | None, ErrorCode]:
        key = (group_id, member_id)
        if key not in self.sessions and len(self.sessions) >= self.max_sessions:
            return None, ErrorCode.share_session_limit_reached
        session = ShareSession(group_id, member_id)
        self.sessions[key] = session
        return session, ErrorCode.none

    def use(
        self, group_id: str, member_id: str, epoch: int
    ) -> tuple[ShareSession | None, ErrorCode]:
        """The session for a request with ``epoch`` > 0 or -1, moved to its next epoch."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            return None, ErrorCode.share_session_not_found
        if epoch == -1:
            return session, ErrorCode.none
        if epoch != session.epoch:
            return None, ErrorCode.invalid_share_session_epoch
        session.epoch = 1 if session.epoch >= _MAX_EPOCH else session.epoch + 1
        return session, ErrorCode.none

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def on_connection(self, host: str, port: int) -> list[ShareSession]:
        return [s for s in self.sessions.values() if s.connection == (host, port)]

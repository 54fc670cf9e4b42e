"""Client quota enforcement as Kafka's ``ClientQuotaManager`` / ``ClientRequestQuotaManager``.

Three managers: ``produce`` (bytes of Produce requests, ``producer_byte_rate``), ``fetch``
(bytes of Fetch answers, ``consumer_byte_rate``) and ``request`` (handler time as a percentage
of one thread, ``request_percentage``). Each keeps one sensor per quota id: the ``(user,
client-id)`` tags Kafka's ``DefaultQuotaCallback.quotaMetricTags`` picks for a request, so
clients that share a quota (every client of a user with a user quota) share its sensor. The
limit of a sensor is looked up in Kafka's order of precedence:

1. /config/users/<user>/clients/<client-id>
2. /config/users/<user>/clients/<default>
3. /config/users/<user>
4. /config/users/<default>/clients/<client-id>
5. /config/users/<default>/clients/<default>
6. /config/users/<default>
7. /config/clients/<client-id>
8. /config/clients/<default>

A sensor is Kafka's ``Rate`` over ``quota.window.num`` samples of ``quota.window.size.seconds``
each (``SampledRate`` below: the same sample roll-over, purge and window size). Recording a value
that takes the rate above the bound gives Kafka's throttle time: ``(rate - bound) / bound *
window`` ms (``QuotaUtils.throttleTime``; capped at one window for the request quota). A
manager is enabled once any quota of its kind was set since start (``quotasEnabled``); until
then nothing is recorded and the request path pays nothing.

The byte rates of sensors and the average throttle times are served as Prometheus gauges with
Kafka's MBean names as the JMX exporter spells them (``kafka_server_Produce_byte_rate{user,
client_id}``, ``kafka_server_Produce_throttle_time``, ``kafka_server_Fetch_*``,
``kafka_server_Request_request_time``, ``kafka_server_Request_throttle_time``).

Threading: event loop only (``families`` reads copies from the scrape thread).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidelog.broker.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaConfigs,
    Entity,
    QuotaRecord,
    describe_entity,
    entity_of,
)

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from tidelog.broker.dynamic_configs import DynamicConfigs

log = logging.getLogger("tidelog.quotas")

__all__ = (
    "ClientQuotaManager",
    "ClientQuotaManagers",
    "ClientQuotas",
    "SampledRate",
    "monotonic_ms",
    "user_of",
)

#: Kafka's ClientRequestQuotaManager.NanosToPercentagePerSecond, for seconds.
SECONDS_TO_PERCENTAGE = 100.0
#: Sensors idle this long are dropped (Kafka's InactiveSensorExpirationTimeSeconds).
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000

# Kafka's QuotaTypes bits.
_CLIENT_ID_QUOTAS = 1
_USER_QUOTAS = 2
_USER_CLIENT_ID_QUOTAS = 4

#: A quota entity as the callback keys it: (user or None, client id or None); DEFAULT is
#: the <default> name.
DEFAULT = "<default>"
QuotaKey = tuple[str | None, str | None]
#: A sensor's id: Kafka's metric tags (user, client-id), "" for a tag not used.
Tags = tuple[str, str]


def monotonic_ms() -> int:
    """The quota clock: monotonic milliseconds."""
    return time.monotonic_ns() // 1_000_000


def user_of(principal: str) -> str:
    """The user name of a principal (``User:alice`` -> ``alice``)."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class _Sample:
    __slots__ = ("event_count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms


class SampledRate:
    """Kafka's ``Rate`` over a ``WindowedSum`` (``SampledStat``): ``samples`` windows of
    ``window_ms`` (plus the one overlapping the monitored span, as Kafka keeps); a sample is
    dropped once its last event is ``samples`` windows old; the rate is the sum of the samples
    over the time since the oldest one started, never less than ``samples - 1`` full windows
    (at least 1 ms). Per second."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                sample = _Sample(now_ms)
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample.reset(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        expire_age = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def _window(self, oldest_start_ms: int, now_ms: int) -> int:
        elapsed = now_ms - oldest_start_ms
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def window_size_ms(self, now_ms: int) -> int:
        """Kafka's Rate.windowSize (after purging old samples)."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        return self._window(oldest, now_ms)

    def measure(self, now_ms: int) -> float:
        window = self.window_size_ms(now_ms)
        return sum(s.value for s in self._samples) / (window / 1000.0)

    def totals(self, now_ms: int) -> tuple[float, int, int]:
        """(sum, events, window ms) of the live samples, without purging (a scrape from
        another thread reads a copy)."""
        horizon = self.samples * self.window_ms
        live = [s for s in list(self._samples) if now_ms - s.last_event_ms < horizon]
        oldest = min((s.start_ms for s in live), default=now_ms)
        return (
            sum(s.value for s in live),
            sum(s.event_count for s in live),
            self._window(oldest, now_ms),
        )

    def peek(self, now_ms: int) -> float:
        """``measure`` without purging."""
        total, _, elapsed = self.totals(now_ms)
        return total / (elapsed / 1000.0)


class _Average:
    """Kafka's ``Avg`` over sampled windows (the throttle-time sensor)."""

    __slots__ = ("_rate",)

    def __init__(self, samples: int, window_ms: int) -> None:
        self._rate = SampledRate(samples, window_ms)

    def record(self, value: float, now_ms: int) -> None:
        self._rate.record(value, now_ms)

    def peek(self, now_ms: int) -> float:
        total, count, _ = self._rate.totals(now_ms)
        return total / count if count else 0.0


@dataclass(slots=True)
class _Sensors:
    rate: SampledRate
    throttle: _Average
    last_record_ms: int


class ClientQuotaManager:
    """One kind of quota (``Produce``, ``Fetch`` or ``Request``): its limits by entity, the
    sensors and the throttle times (see the module docstring)."""

    def __init__(
        self,
        kind: str,
        metric: str,
        samples: int,
        window_s: int,
        clock_ms: Callable[[], int],
        *,
        max_throttle_ms: int | None = None,
    ) -> None:
        self.kind = kind
        self.metric = metric
        self.samples = samples
        self.window_ms = window_s * 1000
        self.clock_ms = clock_ms
        self.max_throttle_ms = max_throttle_ms
        self._quotas: dict[QuotaKey, float] = {}
        self._enabled = 0
        self._sensors: dict[Tags, _Sensors] = {}

    # -- limits --------------------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        return self._enabled != 0

    def set_quotas(self, quotas: Mapping[QuotaKey, float]) -> None:
        """The whole set of limits of this kind (after a load or an alteration)."""
        self._quotas = dict(quotas)
        for user, client in quotas:
            if user is not None:
                self._enabled |= _USER_CLIENT_ID_QUOTAS if client is not None else _USER_QUOTAS
            elif client is not None:
                self._enabled |= _CLIENT_ID_QUOTAS

    def tags(self, user: str, client_id: str) -> Tags:
        """Kafka's DefaultQuotaCallback.quotaMetricTags: the sensor a request records on."""
        enabled = self._enabled
        if enabled in (0, _CLIENT_ID_QUOTAS):
            return "", client_id
        if enabled == _USER_QUOTAS:
            return user, ""
        if enabled == _USER_CLIENT_ID_QUOTAS:
            return user, client_id
        q = self._quotas
        for key, tags in (
            ((user, client_id), (user, client_id)),
            ((user, DEFAULT), (user, client_id)),
            ((user, None), (user, "")),
            ((DEFAULT, client_id), (user, client_id)),
            ((DEFAULT, DEFAULT), (user, client_id)),
            ((DEFAULT, None), (user, "")),
        ):
            if key in q:
                return tags
        return "", client_id

    def limit(self, tags: Tags) -> float | None:
        """Kafka's DefaultQuotaCallback.quotaLimit for a sensor's tags (None: no quota)."""
        user, client = tags
        q = self._quotas
        if user and client:
            order: tuple[QuotaKey, ...] = (
                (user, client),
                (user, DEFAULT),
                (DEFAULT, client),
                (DEFAULT, DEFAULT),
            )
        elif user:
            order = ((user, None), (DEFAULT, None))
        elif client:
            order = ((None, client), (None, DEFAULT))
        else:
            return None
        for key in order:
            value = q.get(key)
            if value is not None:
                return value
        return None

    def quota(self, user: str, client_id: str) -> float | None:
        """The limit that applies to a client (None: unlimited)."""
        return self.limit(self.tags(user, client_id))

    # -- recording -----------------------------------------------------------------------------
    def _sensors_for(self, tags: Tags, now_ms: int) -> _Sensors:
        sensors = self._sensors.get(tags)
        if sensors is None:
            if len(self._sensors) > 64:
                self._expire(now_ms)
            sensors = _Sensors(
                SampledRate(self.samples, self.window_ms),
                _Average(self.samples, self.window_ms),
                now_ms,
            )
            self._sensors[tags] = sensors
        sensors.last_record_ms = now_ms
        return sensors

    def _expire(self, now_ms: int) -> None:
        for tags in [
            t
            for t, s in self._sensors.items()
            if now_ms - s.last_record_ms > INACTIVE_SENSOR_EXPIRATION_MS
        ]:
            del self._sensors[tags]

    def record(self, user: str, client_id: str, value: float, now_ms: int | None = None) -> int:
        """Record ``value`` and return the throttle time in ms (0: within quota), as Kafka's
        recordAndGetThrottleTimeMs."""
        if not self._enabled:
            return 0
        now = self.clock_ms() if now_ms is None else now_ms
        tags = self.tags(user, client_id)
        sensors = self._sensors_for(tags, now)
        sensors.rate.record(value, now)
        bound = self.limit(tags)
        if bound is None:
            return 0
        rate = sensors.rate.measure(now)
        if rate <= bound:
            return 0
        window = sensors.rate.window_size_ms(now)
        throttle = round((rate - bound) / bound * window)
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return int(throttle)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled Fetch answers empty: Kafka's
        unrecordQuotaSensor)."""
        if self._enabled:
            tags = self.tags(user, client_id)
            self._sensors_for(tags, now_ms).rate.record(-value, now_ms)

    def throttled(self, user: str, client_id: str, throttle_ms: int) -> None:
        """Count a throttle (the throttle-time sensor)."""
        if throttle_ms > 0 and self._enabled:
            now = self.clock_ms()
            self._sensors_for(self.tags(user, client_id), now).throttle.record(throttle_ms, now)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """Kafka's getMaxValueInQuotaWindow: the most one request may bring without being
        throttled for sure (caps a Fetch's max_bytes); None: no quota."""
        if not self._enabled:
            return None
        bound = self.quota(user, client_id)
        if bound is None:
            return None
        return bound * (self.samples - 1) * (self.window_ms / 1000)

    # -- metrics -------------------------------------------------------------------------------
    def rows(self) -> list[tuple[Tags, float, float]]:
        """(tags, rate, average throttle ms) of every sensor (read from another thread)."""
        now = self.clock_ms()
        return [(t, s.rate.peek(now), s.throttle.peek(now)) for t, s in list(self._sensors.items())]


def _key_name(names: Mapping[str, str | None], entity_type: str) -> str | None:
    """An entity's name of ``entity_type`` as the callback keys it (None: not part of it)."""
    if entity_type not in names:
        return None
    value = names[entity_type]
    return DEFAULT if value is None else value


class ClientQuotaManagers:
    """The three managers and the limits they take from the stored quota configs."""

    def __init__(self, samples: int, window_s: int, clock_ms: Callable[[], int]) -> None:
        self.produce = ClientQuotaManager("Produce", "byte_rate", samples, window_s, clock_ms)
        self.fetch = ClientQuotaManager("Fetch", "byte_rate", samples, window_s, clock_ms)
        # ClientRequestQuotaManager: throttle at most one window.
        self.request = ClientQuotaManager(
            "Request", "request_time", samples, window_s, clock_ms, max_throttle_ms=window_s * 1000
        )
        self.clock_ms = clock_ms

    @property
    def enabled(self) -> bool:
        return self.produce.enabled or self.fetch.enabled or self.request.enabled

    def update(self, entities: Mapping[Entity, Mapping[str, float]]) -> None:
        """Take the limits of every user/client-id entity (after load or AlterClientQuotas)."""
        by_key: dict[str, dict[QuotaKey, float]] = {
            PRODUCER_BYTE_RATE: {},
            CONSUMER_BYTE_RATE: {},
            REQUEST_PERCENTAGE: {},
        }
        for entity, values in entities.items():
            names = dict(entity)
            if USER not in names and CLIENT_ID not in names:
                continue  # ip entities: connection_creation_rate (stored only)

            key: QuotaKey = (_key_name(names, USER), _key_name(names, CLIENT_ID))
            for quota_key, limits in by_key.items():
                if quota_key in values:
                    limits[key] = values[quota_key]
        self.produce.set_quotas(by_key[PRODUCER_BYTE_RATE])
        self.fetch.set_quotas(by_key[CONSUMER_BYTE_RATE])
        self.request.set_quotas(by_key[REQUEST_PERCENTAGE])

    def families(self) -> Iterator[Metric]:
        """Per-sensor gauges (Kafka's quota MBeans, JMX exporter spelling)."""
        from prometheus_client.core import GaugeMetricFamily

        for manager, what, unit in (
            (self.produce, "byte_rate", "bytes/s of Produce requests"),
            (self.fetch, "byte_rate", "bytes/s of Fetch answers"),
            (self.request, "request_time", "percent of one request thread"),
        ):
            rate = GaugeMetricFamily(
                f"kafka_server_{manager.kind}_{what}",
                f"Tracking {unit} per user/client-id (quota sensor)",
                labels=["user", "client_id"],
            )
            throttle = GaugeMetricFamily(
                f"kafka_server_{manager.kind}_throttle_time",
                "Tracking average throttle-time (ms) per user/client-id",
                labels=["user", "client_id"],
            )
            for (user, client), value, throttle_ms in manager.rows():
                rate.add_metric([user, client], value)
                throttle.add_metric([user, client], throttle_ms)
            yield rate
            yield throttle


def _record_to_plain(record: QuotaRecord) -> dict[str, Any]:
    return {"entity": dict(record.entity), "key": record.key, "value": record.value}


def _record_of_plain(plain: Mapping[str, Any]) -> QuotaRecord | None:
    entity, key, value = plain.get("entity"), plain.get("key"), plain.get("value")
    if not isinstance(entity, dict) or not isinstance(key, str):
        return None
    if value is not None and not isinstance(value, int | float):
        return None
    pairs = [(str(t), None if n is None else str(n)) for t, n in entity.items()]
    return QuotaRecord(entity_of(pairs), key, None if value is None else float(value))


class ClientQuotas:
    """Client quotas of a broker: the configs (``broker/client_quotas.py``), kept in the
    dynamic configs file, and the managers enforcing them."""

    def __init__(
        self,
        dynamic_configs: DynamicConfigs,
        samples: int,
        window_s: int,
        clock_ms: Callable[[], int],
    ) -> None:
        self._dynamic_configs = dynamic_configs
        self.configs = ClientQuotaConfigs()
        self.managers = ClientQuotaManagers(samples, window_s, clock_ms)
        #: Whether any quota was set since start (the request path checks only this).
        self.enabled = False

    def load(self) -> None:
        """Replay the stored records (after ``DynamicConfigs.load``)."""
        for plain in self._dynamic_configs.client_quota_records():
            record = _record_of_plain(plain)
            if record is None:
                log.warning("ignoring an unreadable client quota record: %r", plain)
                continue
            self.configs.apply(record)
        self._refresh()

    def _refresh(self) -> None:
        self.managers.update(self.configs.entities())
        self.enabled = self.managers.enabled

    def apply(self, records: list[QuotaRecord]) -> tuple[int, dict[str, Any]]:
        """Apply an AlterClientQuotas' records (live); the snapshot to write
        (``DynamicConfigs.write``, in a worker thread) before answering."""
        for record in records:
            self.configs.apply(record)
            log.info(
                "client quota %s %s %s",
                describe_entity(record.entity),
                record.key,
                "removed" if record.value is None else f"set to {record.value}",
            )
        self._refresh()
        self._dynamic_configs.set_client_quota_records(
            [_record_to_plain(r) for r in self.configs.records()]
        )
        return self._dynamic_configs.snapshot()

    def write(self, snapshot: tuple[int, dict[str, Any]]) -> None:
        """Store a snapshot of ``apply`` (any thread)."""
        self._dynamic_configs.write(snapshot)

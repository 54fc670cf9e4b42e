"""`tidelog replay` / `spark-submit scripts/replay_topics.py`: replay topics into Spark.

Writes under --output: records/ (partitioned by topic; parquet, json or csv), analytics/ (each
table as .parquet and .json), charts/*.png and report.html. --sql runs a query on the `records`
view and prints the result.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import re
import sys
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from tidelog.analytics.options import OptionError, parse_options
from tidelog.analytics.plan import PlanError, open_backend, plan_read, select_partitions

STEPS = 5  # 3 with --no-report


class Progress:
    """Numbered steps with elapsed time, on stderr."""

    def __init__(self, steps: int, stream: TextIO = sys.stderr) -> None:
        self.t0 = time.monotonic()
        self.n = 0
        self.steps = steps
        self.stream = stream

    def step(self, what: str) -> None:
        self.n += 1
        self.say(f"[{self.n}/{self.steps}] {what}")

    def say(self, what: str) -> None:
        print(f"replay {time.monotonic() - self.t0:6.1f}s  {what}", file=self.stream, flush=True)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the `replay` sub-command (for `tidelog`'s plug-in point)."""
    p = subparsers.add_parser(
        "replay",
        help="replay topics into Spark: Parquet, analytics, report",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    _arguments(p)
    p.set_defaults(func=run)
    return p  # type: ignore[no-any-return]


def _arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        help="read over the Kafka protocol from this broker (any Kafka)",
    )
    src.add_argument(
        "--log-dir",
        metavar="DIR",
        help="read segment files of this log dir (or a copy): no broker load",
    )
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--topics", metavar="T1,T2", help="comma-separated topic names")
    sel.add_argument("--topic-pattern", metavar="REGEX", help="topics whose whole name matches")
    for flag, word in (("--from", "start (inclusive)"), ("--to", "end (exclusive)")):
        p.add_argument(
            flag,
            dest=flag[2:] + "_",
            metavar="WHERE",
            help=f"{word}: earliest | latest | OFFSET (every partition) | "
            "@EPOCH_MS | ISO date/time (UTC unless it has a zone) | Spark's JSON "
            '{"topic":{"0":23}}',
        )
    p.add_argument(
        "--master", default=None, help="Spark master (default local[*], or what spark-submit set)"
    )
    p.add_argument("--output", required=True, metavar="DIR", help="where everything is written")
    p.add_argument(
        "--format",
        default="parquet",
        choices=["parquet", "json", "csv"],
        help="format of the records (default parquet)",
    )
    p.add_argument(
        "--csv-binary",
        default="text",
        choices=["text", "base64"],
        help="with --format csv: keys and values as UTF-8 text where they decode (else base64, "
        "named in key_encoding/value_encoding), or all base64 (default text)",
    )
    p.add_argument(
        "--group",
        help="also report this consumer group's lag (needs a broker: "
        "--bootstrap-server, or --lag-bootstrap-server with --log-dir)",
    )
    p.add_argument(
        "--lag-bootstrap-server",
        metavar="HOST:PORT",
        help="broker to ask for --group's offsets when reading --log-dir",
    )
    p.add_argument(
        "--sql",
        help='query on the view "records", printed, e.g. '
        '"SELECT topic, count(*) FROM records GROUP BY topic"',
    )
    p.add_argument("--no-headers", action="store_true", help="leave record headers out")
    p.add_argument(
        "--max-records-per-partition",
        type=int,
        metavar="N",
        help="split a partition's range into Spark tasks of at most N offsets",
    )
    p.add_argument("--no-report", action="store_true", help="skip analytics and report.html")
    p.add_argument(
        "--schema-registry",
        metavar="URL",
        help="Schema Registry to look schema ids up in (default with --log-dir: the log dir's "
        "_schemas topic, offline); its subjects and versions go into the report",
    )
    p.add_argument(
        "--decode",
        metavar="TOPIC=MODE,...",
        help="registry-encoded keys/values per topic: raw (bytes only, the default), decoded "
        "(typed columns instead of bytes), both; * names every other topic. Decoded topics "
        "are written to decoded/<topic>/, records that do not decode to undecodable/",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="replay_topics.py", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    _arguments(p)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args)


_ISO = re.compile(r"\d{4}-\d{2}-\d{2}([T ][\d:.]+)?(Z|[+-]\d{2}:?\d{2})?")


def parse_position(text: str, flag: str) -> tuple[str, str]:
    """--from / --to -> ("offsets", spec) | ("timestamp", ms) | ("offset", n)."""
    t = text.strip()
    if t.lower() in ("earliest", "latest"):
        return "offsets", t.lower()
    if t.startswith("{"):
        return "offsets", t
    if re.fullmatch(r"\d+", t):
        return "offset", t
    if re.fullmatch(r"@\d+", t):
        return "timestamp", t[1:]
    if _ISO.fullmatch(t):
        when = dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        return "timestamp", str(int(when.timestamp() * 1000))
    raise OptionError(
        f"{flag} {text!r}: use earliest, latest, an offset (123), epoch "
        "milliseconds (@1700000000000), an ISO date (2026-11-21T10:00:00Z) or "
        'JSON {"topic":{"0":23}}'
    )


def source_options(args: argparse.Namespace) -> dict[str, str]:
    """The `tidelog` data source options for the command line."""
    opts: dict[str, str] = {}
    if args.log_dir:
        opts["path"] = str(Path(args.log_dir).resolve())
    else:
        opts["kafka.bootstrap.servers"] = args.bootstrap_server
        # kafka.* client options (tidelog replay --command-config sets them)
        opts.update(getattr(args, "client_options", None) or {})
    if args.topics:
        opts["subscribe"] = args.topics
    else:
        opts["subscribePattern"] = args.topic_pattern
    opts["includeHeaders"] = "false" if args.no_headers else "true"
    if args.max_records_per_partition:
        opts["maxRecordsPerPartition"] = str(args.max_records_per_partition)
    for flag, value, side in (("--from", args.from_, "starting"), ("--to", args.to_, "ending")):
        if value is None:
            continue
        kind, spec = parse_position(value, flag)
        if kind == "timestamp":
            opts[f"{side}Timestamp"] = spec
        elif kind == "offsets":
            opts[f"{side}Offsets"] = spec
        else:  # one offset for every chosen partition
            backend = open_backend(parse_options(opts))
            try:
                tps = select_partitions(parse_options(opts), backend, strict=True)
            finally:
                backend.close()
            per: dict[str, dict[str, int]] = {}
            for t, p in tps:
                per.setdefault(t, {})[str(p)] = int(spec)
            opts[f"{side}Offsets"] = json.dumps(per)
    return opts


def _ship_code(spark: Any) -> None:
    """On a cluster, send the tidelog package's analytics and storage to the executors (as
    `tidelog/...` in a zip), for workers whose Python does not have tidelog installed."""
    ship_code(spark)


def ship_code(spark: Any) -> None:
    # The package root (tidelog/__init__.py) without importing names from it: the root
    # package is loaded already, as this module lives below it.
    pkg = Path(str(sys.modules["tidelog"].__file__)).resolve().parent
    path = Path(tempfile.mkdtemp(prefix="tidelog-")) / "tidelog_analytics.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.write(pkg / "__init__.py", "tidelog/__init__.py")
        for sub in ("analytics", "storage", "schema"):
            base = (pkg / sub).resolve()  # a link to the top-level folder in a checkout
            for f in sorted(base.rglob("*.py")):
                z.write(f, f"tidelog/{sub}/{f.relative_to(base)}")
    spark.sparkContext.addPyFile(str(path))


def spark_session(
    master: str | None, app: str = "tidelog-replay", local_default: str = "local[*]"
) -> Any:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app)
    if master or not SparkConf().contains("spark.master"):
        master = master or local_default
        builder = builder.master(master)
    if master is not None and master.startswith("local"):
        # A local master runs every executor in this process: nothing needs another interface,
        # and the host name may resolve to a non-loopback address Spark would otherwise bind.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = builder.config("spark.sql.shuffle.partitions", "8")
    builder = builder.config("spark.sql.session.timeZone", "UTC")
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if not str(spark.sparkContext.master or "local").startswith("local"):
        _ship_code(spark)
    from tidelog.analytics import register

    register(spark)
    return spark


def csv_columns(df: Any, binary: str = "text") -> Any:
    """The records as CSV can hold them (no binary or array columns).

    ``binary="text"``: a key or value that is valid UTF-8 is written as text, any other as
    base64, and ``key_encoding`` / ``value_encoding`` say which (``utf8``, ``base64``; empty for
    null). ``binary="base64"``: every key and value as base64. Headers become JSON."""
    from pyspark.sql import functions as F

    w = df
    for col in ("key", "value"):
        if binary == "base64":
            w = w.withColumn(col, F.base64(col))
            continue
        valid = F.expr(f"is_valid_utf8({col})")
        w = w.withColumn(
            f"{col}_encoding",
            F.when(F.col(col).isNull(), F.lit(None)).when(valid, "utf8").otherwise("base64"),
        ).withColumn(col, F.when(valid, F.decode(col, "UTF-8")).otherwise(F.base64(col)))
    if "headers" in df.columns:
        w = w.withColumn("headers", F.to_json("headers"))
    return w


def _write_records(df: Any, out: Path, fmt: str, csv_binary: str = "text") -> None:
    w = df
    writer_options: dict[str, str] = {}
    if fmt == "csv":
        w = csv_columns(df, csv_binary)
        writer_options["header"] = "true"  # a header row names the columns
    w.write.mode("overwrite").partitionBy("topic").format(fmt).options(**writer_options).save(
        str(out)
    )


def precheck(args: argparse.Namespace) -> str | None:
    """What would make the replay fail, found before Spark starts (seconds saved, one line):
    pyspark or pyarrow missing, no Java, a missing --log-dir, a broker that does not accept
    connections. None when all is well."""
    import importlib.util
    import shutil
    import socket

    def installed(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except ValueError:  # in sys.modules as None: blocked
            return False

    missing = [m for m in ("pyspark", "pyarrow") if not installed(m)]
    if missing:
        return (
            f"{' and '.join(missing)} not installed: install the Spark extra "
            "(pip install 'tidelog[spark]', or ./scripts/test's .venv), which brings "
            "pyspark 4 and pyarrow"
        )
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        return (
            "Spark needs Java 17: install it (apt-get install openjdk-17-jre-headless) "
            "or set JAVA_HOME"
        )
    if args.log_dir:
        path = Path(args.log_dir)
        if not path.exists():
            return f"--log-dir {args.log_dir} does not exist"
        if not path.is_dir():
            return f"--log-dir {args.log_dir} is not a directory"
    for flag in ("bootstrap_server", "lag_bootstrap_server"):
        servers = getattr(args, flag, None)
        if not servers:
            continue
        reasons = []
        for server in (s.strip() for s in servers.split(",") if s.strip()):
            host, _, port = server.rpartition(":")
            try:
                with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
                    break
            except ValueError:
                return f"--{flag.replace('_', '-')} {server!r} is not HOST:PORT"
            except OSError as exc:
                why = "connection refused" if isinstance(exc, ConnectionRefusedError) else exc
                reasons.append(f"{server}: {why}")
        else:
            return (
                f"no broker accepts connections at --{flag.replace('_', '-')} {servers} "
                f"({'; '.join(reasons)})"
            )
    return None


def _typed_replay(
    args: argparse.Namespace, df: Any, topics: list[str], out: Path, progress: Progress
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
    """--decode and --schema-registry: typed topics into decoded/<topic>/, what does not decode
    into undecodable/; returns the report's (schema versions, decoding) tables, or None when
    no registry is in reach."""
    from tidelog.analytics import schemas

    modes = schemas.parse_decode_option(getattr(args, "decode", None))
    url = getattr(args, "schema_registry", None)
    if url:
        catalog = schemas.SchemaCatalog.from_url(url)
        where = f"registry {url}"
    elif args.log_dir:
        catalog = schemas.SchemaCatalog.from_log_dir(args.log_dir)
        where = f"{schemas.SCHEMAS_TOPIC} in {args.log_dir}"
    elif any(m != "raw" for m in modes.values()):
        raise OptionError("--decode needs --schema-registry URL (or --log-dir with _schemas)")
    else:
        return None
    progress.say(f"  schemas: {len(catalog.state.by_id)} from {where}")
    versions = schemas.schema_versions(df, catalog, topics)
    decoding: list[dict[str, Any]] = []
    bads = []
    fmt = "json" if args.format == "csv" else args.format  # CSV holds no struct columns
    for topic in topics:
        mode = modes.get(topic, modes.get("*", "raw"))
        if mode == "raw":
            continue
        decoder = schemas.TopicDecoder.for_topic(catalog, topic, mode)
        if decoder.key is None and decoder.value is None:
            progress.say(f"  {topic}: no subject {topic}-key or {topic}-value: left as bytes")
            continue
        good, bad = schemas.decode(df, decoder)
        good = good.persist()
        bad = bad.persist()
        target = out / "decoded" / topic
        good.write.mode("overwrite").format(fmt).save(str(target))
        decoded, failed = good.count(), bad.count()
        progress.say(f"  {topic}: {decoded:,} decoded -> {target}, {failed:,} undecodable")
        decoding.append({"topic": topic, "mode": mode, "decoded": decoded, "undecodable": failed})
        bads.append(bad)
    if bads:
        side = bads[0]
        for other in bads[1:]:
            side = side.unionByName(other, allowMissingColumns=True)
        side.write.mode("overwrite").partitionBy("topic").format(fmt).save(str(out / "undecodable"))
    return versions, decoding


def run(args: argparse.Namespace) -> int:
    problem = precheck(args)
    if problem is not None:
        print(f"replay: {problem}", file=sys.stderr)
        return 1
    progress = Progress(3 if args.no_report else STEPS)
    try:
        opts = source_options(args)
        checked = parse_options(opts)
    except (OptionError, PlanError) as e:
        print(f"replay: {e}", file=sys.stderr)
        return 2
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    source = (args.log_dir and f"log dir {args.log_dir}") or f"broker {args.bootstrap_server}"
    progress.step(f"starting Spark ({args.master or 'local[*] or spark-submit master'})")
    spark = spark_session(args.master)
    from pyspark import StorageLevel

    progress.step(f"planning the replay from {source}")
    backend = open_backend(checked)
    try:
        tps, ranges = plan_read(checked, backend)
    except (OptionError, PlanError) as e:
        print(f"replay: {e}", file=sys.stderr)
        return 2
    finally:
        backend.close()
    progress.say(
        f"  {len({t for t, _ in tps})} topic(s), {len(tps)} partition(s), "
        f"{sum(r.size for r in ranges):,} offsets in {len(ranges)} Spark task(s)"
    )
    df = spark.read.format("tidelog").options(**opts).load()
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    progress.step(f"reading records and writing them as {args.format}")
    records_dir = out / "records"
    _write_records(df, records_dir, args.format, args.csv_binary)
    count = df.count()
    progress.say(f"  {count:,} records -> {records_dir}")
    try:
        typed = _typed_replay(args, df, sorted({t for t, _ in tps}), out, progress)
    except (OptionError, ValueError, OSError) as e:
        print(f"replay: {e}", file=sys.stderr)
        return 2
    written: list[Path] = []
    page = None
    if not args.no_report:
        from tidelog.analytics import report, tables

        progress.step("computing analytics tables")
        notes: list[str] = []
        lag: list[dict[str, Any]] = []
        lag_server = args.bootstrap_server or args.lag_bootstrap_server
        if args.group and not lag_server:
            notes.append(f"group {args.group!r}: lag needs --lag-bootstrap-server with --log-dir")
        elif args.group:
            lag, err = tables.group_lag(lag_server, args.group)
            if err:
                notes.append(err)
        t = tables.compute(df, lag, tps)
        if typed is not None:
            t = dataclasses.replace(t, schema_versions=typed[0], decoding=typed[1])
        written = tables.write(t, out / "analytics")
        progress.step("drawing the report")
        page = report.write_report(
            t, out, title="tidelog replay", source=source, seconds=progress.elapsed, notes=notes
        )
        for n in notes:
            progress.say(f"  note: {n}")
    if args.sql:
        df.createOrReplaceTempView("records")
        progress.say(f"SQL: {args.sql}")
        try:
            spark.sql(args.sql).show(1000, truncate=80)
        except Exception as e:  # a user's query: say what Spark said
            print(f"replay: --sql failed: {e}", file=sys.stderr)
            return 1
    df.unpersist()
    print(
        f"\nreplayed {count:,} records from {len(tps)} partition(s) of {source} "
        f"in {progress.elapsed:.1f} s"
    )
    print(f"  records:   {records_dir}/ ({args.format}, partitioned by topic)")
    if written:
        print(f"  analytics: {out / 'analytics'}/ ({len(written) // 2} tables, .parquet + .json)")
    if page:
        print(f"  report:    {page} (charts in {out / 'charts'}/)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

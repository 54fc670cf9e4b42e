"""docker/: the Dockerfile, compose.yaml and entry point agree, and the entry point runs a broker.

Quick checks that need no container engine: the files read, and the entry point script run
outside a container with the image's environment (TIDELOG_* from the Dockerfile), on a free
port and a temporary data dir, checked with the HEALTHCHECK command itself. The images
themselves are built and run with podman by test_docker_broker.py and test_docker_replay.py.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.support.net import free_port as _free_port
from tidelog.config import BROKER_CONFIGS, env_name, load_broker_config, parse_listener

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
VENV_BIN = Path(sys.executable).parent


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [arg for o, arg in self.instructions if o == op]

    def last(self, op: str) -> str:
        values = self.all(op)
        assert values, f"stage {self.name} has no {op}"
        return values[-1]


def parse_dockerfile(path: Path) -> list[Stage]:
    """Instructions per stage (continuations joined, comments dropped)."""
    stages: list[Stage] = []
    logical, buf = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        logical.append(buf + line)
        buf = ""
    for line in logical:
        op, _, arg = line.partition(" ")
        op, arg = op.upper(), arg.strip()
        if op == "FROM":
            words = arg.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(name, words[0]))
        else:
            stages[-1].instructions.append((op, arg))
    return stages


def env_of(stages: list[Stage], final: Stage) -> dict[str, str]:
    """ENV of ``final`` including what it inherits from its base stages."""
    chain, stage = [final], final
    by_name = {s.name: s for s in stages}
    while stage.base in by_name:
        stage = by_name[stage.base]
        chain.append(stage)
    env: dict[str, str] = {}
    for s in reversed(chain):
        for arg in s.all("ENV"):
            for item in shlex.split(arg):
                key, _, value = item.partition("=")
                env[key] = value
    return env


def json_list(arg: str) -> list[str]:
    value = json.loads(arg)
    assert isinstance(value, list), arg
    return [str(v) for v in value]


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse_dockerfile(DOCKER / "Dockerfile")


@pytest.fixture(scope="module")
def broker_stage(stages: list[Stage]) -> Stage:
    return stages[-1]  # the default build target


def interpolate(text: str) -> str:
    """Compose's ${VAR:-default}, with every variable unset."""
    return re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", text)


@pytest.fixture(scope="module")
def compose() -> dict[str, object]:
    data = yaml.safe_load(interpolate((DOCKER / "compose.yaml").read_text()))
    assert isinstance(data, dict)
    return data


def healthcheck_cmd(stage: Stage) -> list[str]:
    arg = stage.last("HEALTHCHECK")
    _, sep, cmd = arg.partition("CMD ")
    assert sep, arg
    return json_list(cmd)


def tidelog_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("TIDELOG_")}


# ---------------------------------------------------------------- static agreement


def test_dockerfile_broker_stage(stages: list[Stage], broker_stage: Stage) -> None:
    assert stages[0].base == "python:3.11-slim"
    assert broker_stage.name == "broker"
    user = broker_stage.last("USER")
    assert user not in ("root", "0") and not user.startswith("0:")
    assert "9092" in broker_stage.last("EXPOSE").split()
    assert json_list(broker_stage.last("VOLUME")) == ["/var/lib/tidelog"]
    env = env_of(stages, broker_stage)
    assert env["TIDELOG_LOG_DIRS"] == "/var/lib/tidelog"
    # The health check probes the listener the configuration names (no fixed address).
    assert healthcheck_cmd(broker_stage)[:2] == ["tidelog", "probe"]
    assert "--bootstrap-server" not in healthcheck_cmd(broker_stage)
    entry = json_list(broker_stage.last("ENTRYPOINT"))
    copies = [c.split() for c in broker_stage.all("COPY") if not c.startswith("--from")]
    on_path = {entry[0], f"/usr/local/bin/{entry[0]}"}  # python images have it on PATH
    assert [src for src, dst in copies if dst in on_path] == ["docker/entrypoint.sh"]
    assert os.access(DOCKER / "entrypoint.sh", os.X_OK)


def test_every_copied_path_exists_and_is_in_the_build_context(stages: list[Stage]) -> None:
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text().split()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for stage in stages:
        for arg in stage.all("COPY"):
            if arg.startswith("--from"):
                continue  # from another stage, not the build context
            *sources, _dest = arg.split()
            for src in sources:
                assert (ROOT / src).exists(), f"COPY {src}: no such path"
                assert src.rstrip("/") in allowed, f"{src} is excluded by Dockerfile.dockerignore"


def test_image_environment_is_a_valid_broker_config(
    stages: list[Stage], broker_stage: Stage
) -> None:
    env = tidelog_env(env_of(stages, broker_stage))
    config = load_broker_config(None, (), env)  # raises ConfigError naming a bad variable
    exposed = {int(p.split("/")[0]) for p in broker_stage.last("EXPOSE").split()}
    assert {parse_listener(x)[1] for x in config.listeners} <= exposed
    assert parse_listener(config.listeners[0])[0] == "0.0.0.0"  # reachable from outside
    assert config.advertised_listeners
    port = parse_listener(config.listeners[0])[1]
    assert config.get("metrics.port") in exposed  # the metrics port is exposed too
    registry = config.get("schema.registry.listeners")  # the Schema Registry, on 8081
    assert registry and [int(x.rsplit(":", 1)[1]) for x in registry] == [8081]
    assert 8081 in exposed
    from tidelog.tools.probe import configured_address

    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        assert configured_address() == f"127.0.0.1:{port}"
        mp.setenv("TIDELOG_LISTENERS", "PLAINTEXT://0.0.0.0:19999")
        assert configured_address() == "127.0.0.1:19999"  # follows the configured listener


def test_labels_pins_and_init(stages: list[Stage], compose: dict[str, object]) -> None:
    runtime = next(s for s in stages if s.name == "runtime")  # both images start from it
    assert {s.base for s in stages if s.name in ("broker", "replay")} == {"runtime"}
    labels = " ".join(runtime.all("LABEL"))
    for key in ("title", "description", "version", "licenses", "source"):
        assert f"org.opencontainers.image.{key}=" in labels
    installs = [r for s in stages for r in s.all("RUN") if re.search(r"\bpip\b.* install ", r)]
    assert installs and all("--constraint docker/constraints.txt" in r for r in installs)
    pins = (DOCKER / "constraints.txt").read_text().split()
    pinned = {line.split("==")[0] for line in pins if "==" in line}
    assert {"kio", "kafka-python", "uvloop", "pyspark", "pyarrow", "javaproperties"} <= pinned
    replay = next(s for s in stages if s.name == "replay")
    assert json_list(replay.last("ENTRYPOINT"))[:2] == ["/usr/bin/tini", "--"]
    assert any("tini" in r for r in replay.all("RUN"))
    services = compose["services"]
    assert isinstance(services, dict)
    assert services["replay"]["init"] is True


def test_env_names_follow_the_config_package(caplog: pytest.LogCaptureFixture) -> None:
    # a TIDELOG_* name that is no setting is named in a warning, and the broker carries on
    with caplog.at_level("WARNING", logger="tidelog.config"):
        load_broker_config(None, (), {"TIDELOG_NOT_A_SETTING": "1"})
    assert "TIDELOG_NOT_A_SETTING" in caplog.text
    assert env_name("advertised.listeners") in {env_name(n) for n in BROKER_CONFIGS}


def test_compose_broker_agrees_with_the_image(
    stages: list[Stage], broker_stage: Stage, compose: dict[str, object]
) -> None:
    services = compose["services"]
    assert isinstance(services, dict)
    broker = services["broker"]
    build = broker["build"]
    assert (DOCKER / build["context"] / build["dockerfile"]).resolve() == DOCKER / "Dockerfile"
    assert build.get("target", "broker") == "broker"
    env = {**tidelog_env(env_of(stages, broker_stage)), **broker["environment"]}
    config = load_broker_config(None, (), {k: str(v) for k, v in env.items()})
    listener_port = parse_listener(config.listeners[0])[1]
    published = {int(p.split(":")[-1]): int(p.split(":")[-2]) for p in broker["ports"]}
    assert all(p.startswith("127.0.0.1:") for p in broker["ports"])  # loopback unless told
    assert listener_port in published
    advertised_port = parse_listener(config.advertised_listeners[0])[1]
    assert published[listener_port] == advertised_port  # clients reach what is advertised
    metrics_port = config.get("metrics.port")
    if metrics_port is not None:
        assert metrics_port in published
    for registry in config.get("schema.registry.listeners") or []:
        assert published[int(registry.rsplit(":", 1)[1])] == 8081
    volume = json_list(broker_stage.last("VOLUME"))[0]
    assert any(v.split(":")[1] == volume for v in broker["volumes"])
    assert config.log_dirs == [volume]
    assert broker["healthcheck"]["test"] == ["CMD", *healthcheck_cmd(broker_stage)]


def test_compose_replay_service(stages: list[Stage], compose: dict[str, object]) -> None:
    services = compose["services"]
    assert isinstance(services, dict)
    replay = services["replay"]
    assert replay["profiles"] == ["replay"]
    assert replay["build"]["target"] in {s.name for s in stages}
    assert replay["network_mode"] == "service:broker"
    assert replay["depends_on"]["broker"]["condition"] == "service_healthy"
    assert replay["entrypoint"][:2] == ["tidelog", "replay"]
    from tidelog.cli import build_parser

    parser = build_parser()
    argv = [a.replace("${REPLAY_TOPICS:-[^_].*}", "[^_].*") for a in replay["command"]]
    args = parser.parse_args(["replay", *argv])  # the command line is one replay accepts
    assert args.bootstrap_server == "127.0.0.1:9092"


# ---------------------------------------------------------------- the entry point, run


def _image_env(stages: list[Stage], broker_stage: Stage, port: int, data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDELOG_")}
    env.update(tidelog_env(env_of(stages, broker_stage)))
    env.update(
        {
            # Loopback only in tests; otherwise the image's own values.
            "TIDELOG_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
            "TIDELOG_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
            "TIDELOG_LOG_DIRS": str(data),
            "TIDELOG_OFFSETS_TOPIC_NUM_PARTITIONS": "1",  # quicker start
            "TIDELOG_METRICS_PORT": str(_free_port()),
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            "PYTHONPATH": str(ROOT),
        }
    )
    return env


def _wait_healthy(cmd: list[str], env: dict[str, str], proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the entry point exited before the broker answered"
        if subprocess.run(cmd, env=env, capture_output=True, timeout=30).returncode == 0:
            return
        time.sleep(0.3)
    raise AssertionError("the broker never became healthy")


def test_entry_point_serves_and_is_healthy(
    stages: list[Stage], broker_stage: Stage, tmp_path: Path
) -> None:
    port = _free_port()
    data = tmp_path / "var-lib-tidelog"
    env = _image_env(stages, broker_stage, port, data)
    health = healthcheck_cmd(broker_stage)  # as the image runs it: it finds the port itself
    log = tmp_path / "broker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["sh", str(DOCKER / "entrypoint.sh"), "--override", "num.partitions=3"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        _wait_healthy(health, env, proc)
        made = subprocess.run(
            ["tidelog", "topics", "--bootstrap-server", f"127.0.0.1:{port}", "--create",
             "--topic", "from-docker-test"],
            env=env, capture_output=True, timeout=60,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        shown = subprocess.run(
            ["tidelog", "topics", "--bootstrap-server", f"127.0.0.1:{port}", "--describe",
             "--topic", "from-docker-test"],
            env=env, capture_output=True, timeout=60,
        )  # fmt: skip
        assert b"PartitionCount: 3" in shown.stdout  # the --override reached `tidelog serve`
        assert (data / "from-docker-test-0").is_dir()
    finally:
        proc.send_signal(signal.SIGTERM)  # `docker stop`; exec made tidelog PID 1's process
        code = proc.wait(timeout=60)
    assert code == 0, log.read_text()
    assert "tidelog stopped cleanly" in log.read_text()


def test_entry_point_rejects_an_unusable_data_dir(
    stages: list[Stage], broker_stage: Stage, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    env = _image_env(stages, broker_stage, _free_port(), blocker / "data")
    r = subprocess.run(["sh", str(DOCKER / "entrypoint.sh")], env=env, capture_output=True,
                       timeout=60)  # fmt: skip
    assert r.returncode == 1
    assert re.search(rb"log directory .* is not writable", r.stderr)
    assert b"TIDELOG_LOG_DIRS" in r.stderr


def test_entry_point_runs_other_commands(
    stages: list[Stage], broker_stage: Stage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "cwd"  # nothing may appear here (serve --help once made dirs of its lines)
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    env = _image_env(stages, broker_stage, _free_port(), tmp_path / "d")
    dead = subprocess.run(
        ["sh", str(DOCKER / "entrypoint.sh"), "probe", "--bootstrap-server",
         f"127.0.0.1:{_free_port()}", "--timeout", "1"],
        env=env, capture_output=True, timeout=60,
    )  # fmt: skip
    assert dead.returncode == 1 and b"no broker answered" in dead.stderr
    echo = subprocess.run(["sh", str(DOCKER / "entrypoint.sh"), "echo", "hi"], env=env,
                          capture_output=True, timeout=60)  # fmt: skip
    assert echo.stdout == b"hi\n"
    # Every tidelog sub-command goes to tidelog, config-reference included.
    from tidelog.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands is not None
    for name in sorted(commands):
        r = subprocess.run(["sh", str(DOCKER / "entrypoint.sh"), name, "--help"], env=env,
                           capture_output=True, timeout=60)  # fmt: skip
        assert r.returncode == 0, (name, r.stderr)
        assert f"tidelog {name}".encode() in r.stdout, name
    ref = subprocess.run(["sh", str(DOCKER / "entrypoint.sh"), "config-reference"], env=env,
                         capture_output=True, timeout=60)  # fmt: skip
    assert ref.returncode == 0 and b"log.dirs" in ref.stdout, ref.stderr
    unknown = subprocess.run(["sh", str(DOCKER / "entrypoint.sh"), "no-such-command"], env=env,
                             capture_output=True, timeout=60)  # fmt: skip
    assert unknown.returncode == 127 and b"no-such-command" in unknown.stderr
    assert [p.name for p in cwd.iterdir() if p.name != ".hypothesis"] == []  # (pytest's own)


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["serve", "--help"],
        ["--version"],
        ["-h"],
        ["--override", "num.partitions=2", "--no-such-flag"],
    ],
)
def test_help_version_and_bad_flags_make_no_directories(
    stages: list[Stage], broker_stage: Stage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    args: list[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "data"  # TIDELOG_LOG_DIRS: not made either (serve does not run)
    env = _image_env(stages, broker_stage, _free_port(), data)
    r = subprocess.run(["sh", str(DOCKER / "entrypoint.sh"), *args], env=env,
                       capture_output=True, timeout=60)  # fmt: skip
    if "--no-such-flag" in args:
        assert r.returncode == 2 and b"unrecognized arguments: --no-such-flag" in r.stderr
    else:
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith(b"usage: tidelog serve") or r.stdout.startswith(b"tidelog")
    assert [p.name for p in tmp_path.iterdir() if p.name != ".hypothesis"] == []


@pytest.mark.parametrize(
    ("extra_env", "args"),
    [
        ({"TIDELOG_LOG_DIR": "{bad}"}, []),  # log.dir when log.dirs is unset
        ({}, ["--override", "log.dirs={bad}"]),
        ({}, ["serve", "--override", "log.dir={good}", "--override", "log.dirs={bad}"]),
    ],
)
def test_log_dir_check_follows_the_setting_that_names_the_dir(
    stages: list[Stage], broker_stage: Stage, tmp_path: Path, extra_env: dict[str, str],
    args: list[str],
) -> None:  # fmt: skip
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    paths = {"bad": str(blocker / "data"), "good": str(tmp_path / "ok")}
    env = _image_env(stages, broker_stage, _free_port(), tmp_path / "unused")
    del env["TIDELOG_LOG_DIRS"]
    env.update({k: v.format(**paths) for k, v in extra_env.items()})
    argv = [a.format(**paths) for a in args]
    r = subprocess.run(["sh", str(DOCKER / "entrypoint.sh"), *argv], env=env,
                       capture_output=True, timeout=60)  # fmt: skip
    assert r.returncode == 1, r.stderr
    assert f"log directory {paths['bad']} is not writable".encode() in r.stderr
    assert not (tmp_path / "unused").exists()

"""``tidelog serve`` start-up failures: one ERROR line naming the cause, exit 1, no traceback.

Run through the CLI in a subprocess, as a user would. Permission cases drop root's
DAC-override capabilities with ``setpriv`` (root ignores file modes otherwise).
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from tests.support.broker_process import serve_to_the_end

ROOT = Path(__file__).resolve().parents[2]
#: Without these capabilities root obeys file modes like any user.
_DROP_ROOT_POWERS = [
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search,-fowner",
    "--inh-caps=-dac_override,-dac_read_search,-fowner",
]


def _serve(
    log_dirs: str, *, as_user: bool = False, port: int | None = None, extra: tuple[str, ...] = ()
) -> str:
    """Run ``tidelog serve``; assert exit 1 with one ERROR line; return that line."""
    prefix: tuple[str, ...] = ()
    if as_user and os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: file modes cannot be tested")
        prefix = tuple(_DROP_ROOT_POWERS)
    result = serve_to_the_end(log_dirs, *extra, port=port, prefix=prefix)
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, result.stderr
    # nothing else is complained about before the cause (a file the broker has no business
    # reading yet: the dir is not even locked)
    assert " WARNING " not in result.stderr, result.stderr
    assert "cannot start: " in errors[0]
    return errors[0]


def test_log_dir_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "data"
    target.write_text("not a dir")
    line = _serve(str(target))
    assert f"log dir {target} is not a directory" in line
    assert target.read_text() == "not a dir"


def test_log_dir_whose_parent_is_a_file(tmp_path: Path) -> None:
    parent = tmp_path / "file"
    parent.write_text("x")
    line = _serve(str(parent / "data"))
    assert f"cannot create log dir {parent / 'data'}" in line and "Not a directory" in line


def test_missing_log_dir_that_cannot_be_created(tmp_path: Path) -> None:
    parent = tmp_path / "locked"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        line = _serve(str(parent / "deep" / "data"), as_user=True)
    finally:
        parent.chmod(0o755)
    assert f"cannot create log dir {parent / 'deep' / 'data'}" in line
    assert "Permission denied" in line


def test_read_only_log_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o555)
    try:
        line = _serve(str(data), as_user=True)
    finally:
        data.chmod(0o755)
    assert f"cannot create {data / '.lock'}: Permission denied" in line
    assert "read-write access" in line
    assert list(data.iterdir()) == []


def test_unwritable_log_dir_with_an_old_lock_file(tmp_path: Path) -> None:
    """The ``.lock`` file of an earlier run is writable, the dir itself is not."""
    data = tmp_path / "data"
    data.mkdir()
    (data / ".lock").write_text("")
    (data / ".lock").chmod(0o666)
    data.chmod(0o555)
    try:
        line = _serve(str(data), as_user=True)
    finally:
        data.chmod(0o755)
    assert f"log dir {data} is not writable" in line
    assert sorted(p.name for p in data.iterdir()) == [".lock"]


def test_second_of_two_log_dirs_bad_releases_the_first(tmp_path: Path) -> None:
    good = tmp_path / "good"
    bad = tmp_path / "bad"
    bad.write_text("")
    line = _serve(f"{good},{bad}")
    assert f"log dir {bad} is not a directory" in line
    # nothing but the lock file was made in the good dir, and it is free again
    assert sorted(p.name for p in good.iterdir()) == [".lock"]
    from tidelog.storage.lockfile import LogDirLock

    LogDirLock.acquire(good).release()


def test_listener_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        line = _serve(str(tmp_path / "data"), port=port)
    assert "address already in use" in line
    # bound first, as Kafka's SocketServer does: the log dir was neither made nor loaded (no
    # lock taken, no internal topic created)
    assert not (tmp_path / "data").exists()


def test_listener_port_in_use_leaves_an_existing_log_dir_as_it_was(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "meta.properties").write_text("version=1\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        line = _serve(str(data), port=int(taken.getsockname()[1]))
    assert "address already in use" in line
    assert sorted(p.name for p in data.iterdir()) == ["meta.properties"]


@pytest.mark.parametrize("how", ["empty", "torn"])
@pytest.mark.parametrize("name", ["__acls.json", "__scram_credentials.json"])
def test_damaged_security_file(tmp_path: Path, name: str, how: str) -> None:
    from tidelog.broker.security.authorizer import STANDARD_AUTHORIZER, Authorizer
    from tidelog.broker.security.scram import ScramCredentialStore, credential_from_password

    log_dir = tmp_path / "data"
    log_dir.mkdir()
    target = log_dir / name
    # A real file as the broker writes it, then damaged.
    if name == "__acls.json":
        from tidelog.broker.security.acls import (
            AclBinding,
            Operation,
            PatternType,
            Permission,
            ResourceType,
        )

        authorizer = Authorizer(target)
        binding = AclBinding(ResourceType.TOPIC, PatternType.LITERAL, "t", "User:alice", "*",
                             Operation.READ, Permission.ALLOW)  # fmt: skip
        authorizer.create([binding])
        authorizer.save(*authorizer.snapshot())
    else:
        store = ScramCredentialStore(target)
        store.put("alice", "SCRAM-SHA-256", credential_from_password("SCRAM-SHA-256", "pw", 4096))
        store.save()
        assert target.stat().st_mode & 0o777 == 0o600
    data = target.read_bytes()
    assert len(data) > 20
    target.write_bytes(b"" if how == "empty" else data[: len(data) // 2])
    line = _serve(str(log_dir), extra=(f"authorizer.class.name={STANDARD_AUTHORIZER}",))
    assert f"{target} is not a readable" in line, line
    assert "move it away" in line

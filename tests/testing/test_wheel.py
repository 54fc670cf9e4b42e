"""The built wheel installs next to an application's own ``config`` package.

Builds the wheel (``pip wheel --no-deps``), installs it with ``--no-deps`` into a fresh venv
whose dependencies come from the project venv's site-packages (a ``.pth`` line: nothing is
downloaded), and imports the application's ``config`` and tidelog side by side there; the wheel
and the venv hold no top-level ``broker``, ``storage``, ``config``, ``protocol`` or
``analytics``. The installed broker then starts and answers (``tidelog.testing.Broker``).
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = ("broker", "storage", "config", "protocol", "analytics", "cli")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("tidelog-*.whl")
    return built


def test_wheel_holds_only_the_tidelog_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"tidelog"}
    for sub in (*FORBIDDEN, "testing"):
        assert f"tidelog/{sub}/__init__.py" in names
    assert "tidelog/testing/plugin.py" in names
    assert "tidelog/config/broker.yaml" in names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[pytest11]\ntidelog = tidelog.testing.plugin" in text
    assert "tidelog = tidelog.cli:main" in text


def test_wheel_installs_next_to_an_application_config_package(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # The dependencies (kio, uvloop, ...) from the project venv, after the venv's own packages.
    # A plain path line: the project venv's .pth files (its editable tidelog) are not run.
    (site / "zz_project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    subprocess.run(
        [*pip, "install", "--no-deps", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    installed = {p.name for p in site.iterdir()}
    assert "tidelog" in installed
    assert not installed & set(FORBIDDEN), installed

    app = tmp_path / "app"
    (app / "config").mkdir(parents=True)
    (app / "config" / "__init__.py").write_text("NAME = 'the application config'\n")
    check = textwrap.dedent(
        """
        import struct, socket
        import config
        import tidelog
        from tidelog.config import load_broker_config
        from tidelog.storage.log import PartitionLog
        from tidelog.testing import Broker

        assert config.NAME == "the application config", config.__file__
        assert tidelog.__file__.startswith(SITE), tidelog.__file__
        assert load_broker_config(None, ["num.partitions=2"]).get_int("num.partitions") == 2
        with Broker() as b:
            host, port = b.bootstrap_servers.split(":")
            body = struct.pack(">hhih", 18, 0, 7, 0)
            with socket.create_connection((host, int(port)), timeout=10) as s:
                s.sendall(struct.pack(">i", len(body)) + body)
                head = s.recv(8)
            assert struct.unpack(">ii", head)[1] == 7, head
        print("ok", config.__file__, tidelog.__file__)
        """
    ).replace("SITE", repr(str(site)))
    proc = subprocess.run(
        [str(python), "-c", check],
        cwd=app,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("ok " + str(app / "config" / "__init__.py"))

"""``scripts/chaos``: the long reliability runs, with the figures they produce.

    scripts/chaos                     200 SIGKILLs under load (crash_harness), figures at the end
    scripts/chaos --kills 50 --seed 7 fewer kills, a replayable run
    scripts/chaos --fuzz              the fuzz module with CHAOS_FUZZ_SCALE=20 (~50k inputs)
    scripts/chaos --fuzz --fuzz-scale 5 --kills 0
    scripts/chaos --kills 0 --txn-kills 20   transactions under SIGKILL (txn_chaos)

Exit status 0 when every run found nothing wrong.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.crash.crash_harness import run_chaos
from tests.crash.txn_chaos import run_txn_chaos

ROOT = Path(__file__).resolve().parent.parent.parent


def _say(line: str) -> None:
    print(time.strftime("%H:%M:%S"), line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="SIGKILLs to survive (0: none)")
    parser.add_argument("--seed", type=int, default=None, help="replay a run")
    parser.add_argument("--producers", type=int, default=3)
    parser.add_argument("--rate", type=float, default=400.0, help="records/s per producer")
    parser.add_argument("--startup-kills", type=float, default=0.15, help="chance per round")
    parser.add_argument(
        "--txn-kills", type=int, default=20, help="SIGKILLs under a transactional producer"
    )
    parser.add_argument("--fuzz", action="store_true", help="run the fuzz tests, scaled up")
    parser.add_argument("--fuzz-scale", type=float, default=20.0)
    args = parser.parse_args(argv)
    failed = False
    if args.kills > 0:
        report = run_chaos(
            args.kills,
            seed=args.seed,
            producers=args.producers,
            rate=args.rate,
            startup_kill_chance=args.startup_kills,
            say=_say,
        )
        _say(f"chaos result: {report.summary()}")
        for problem in report.problems[:50]:
            _say(f"  problem: {problem}")
        failed |= not report.ok
    if args.txn_kills > 0:
        with tempfile.TemporaryDirectory(prefix="tidelog-txn-chaos-") as work:
            txn_report = run_txn_chaos(
                args.txn_kills, work_dir=Path(work), seed=args.seed, say=_say
            )
        for problem in txn_report.problems[:50]:
            _say(f"  problem: {problem}")
        failed |= not txn_report.ok
    if args.fuzz:
        env = dict(os.environ, CHAOS_FUZZ_SCALE=str(args.fuzz_scale))
        command = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]
        command += ["-o", "addopts=--strict-markers", "--timeout=7200", "tests/fuzz"]
        _say(f"fuzz: {' '.join(command[1:])} (CHAOS_FUZZ_SCALE={args.fuzz_scale})")
        failed |= subprocess.run(command, cwd=ROOT, env=env).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

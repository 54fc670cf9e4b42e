#!/usr/bin/env python3
"""Replay Kafka topics into Spark: `spark-submit scripts/replay_topics.py --log-dir DIR ...`.

Same job as `tidelog replay`; run with --help for the arguments. Works with any master
spark-submit is given (the analytics and storage packages are shipped to the executors).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tidelog.analytics.replay import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Spark's log at the start of a JVM that gpu-hamlet launches itself.

`setLogLevel` takes effect only once the session runs, and by then Spark's default log4j profile
has printed its own lines and two warnings that hold on most machines (a loopback hostname, no
native Hadoop library) above the command's output. A JVM that this process starts reads
`log4j2.properties` beside this module instead: warnings and errors, less those two. Nothing
changes where the user chose a log configuration (SPARK_CONF_DIR's, or a
-Dlog4j2.configurationFile of their own), nor under spark-submit, which started the JVM before
this code runs.
"""

from __future__ import annotations

import os
from pathlib import Path

CONFIG = Path(__file__).with_name("log4j2.properties")
_OPTION = "-Dlog4j2.configurationFile="


def quiet_jvm_start() -> None:
    """Have the JVM this process may start read CONFIG (through SPARK_SUBMIT_OPTS, which the
    launcher adds to the driver's options, beside any spark.driver.extraJavaOptions)."""
    opts = os.environ.get("SPARK_SUBMIT_OPTS", "")
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if _OPTION in opts or (conf_dir and (Path(conf_dir) / "log4j2.properties").exists()):
        return
    os.environ["SPARK_SUBMIT_OPTS"] = f"{opts} {_OPTION}{CONFIG}".strip()

"""Entry script for spark-submit: the `gpu-hamlet run` command inside a submitted application.

    spark-submit --properties-file spark-conf/local.conf \\
        $(python -c 'import gpu_hamlet.spark.submit as s; print(s.__file__)') \\
        --workload workload.hamlet --events events.parquet --out results/

It takes the options of `gpu-hamlet run` (without --master: spark-submit sets it) and exits as
it does: 0 done, 2 bad input or usage, 1 a failure while running.
"""

from __future__ import annotations

import sys

from gpu_hamlet.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))

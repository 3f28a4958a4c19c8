#!/usr/bin/env bash
# Spark GPU discovery script: prints the GPUs of this host as a Spark ResourceInformation JSON,
# e.g. {"name": "gpu", "addresses": ["0", "1"]}. Used by spark.executor.resource.gpu.discoveryScript.
set -euo pipefail
addrs=$(nvidia-smi --query-gpu=index --format=csv,noheader | sed -e 's/^[[:space:]]*//' -e 's/.*/"&"/' | paste -sd, -)
echo "{\"name\": \"gpu\", \"addresses\": [${addrs}]}"

"""The GPU image (Dockerfile) agrees with pyproject.toml, where its Python pins live.

No Docker engine runs in CI, so this checks the text: the ARGs that pip cannot pin against the
pins they must match, and that the image installs the project with its gpu extra and puts the
RAPIDS Accelerator and the discovery script where spark-conf/gpu-cluster.conf expects them.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
ARGS = dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE, re.MULTILINE))
_PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([0-9][0-9.]*)$")


def pins(requirements: list[str]) -> dict[str, str]:
    """Name -> version of the exact (==) requirements."""
    return {m[1]: m[2] for m in map(_PIN.match, requirements) if m}


GPU = PROJECT["optional-dependencies"]["gpu"]


def test_gpu_extra_pins_every_package_exactly():
    assert GPU and set(pins(GPU)) == {"cudf-cu12", "cupy-cuda12x", "numba-cuda"}, GPU


def test_spark_version_is_the_pyspark_pin():
    assert ARGS["SPARK_VERSION"] == pins(PROJECT["dependencies"])["pyspark"]


def test_rapids_accelerator_and_cudf_are_one_release_line():
    year, month = (int(x) for x in ARGS["RAPIDS_VERSION"].split(".")[:2])
    cudf = pins(GPU)["cudf-cu12"]
    assert (year, month) == tuple(int(x) for x in cudf.split(".")[:2]), (
        ARGS["RAPIDS_VERSION"],
        cudf,
    )


def test_cuda_major_matches_the_cuda_packages():
    major = ARGS["CUDA_VERSION"].split(".")[0]
    assert major == "12"
    for req in GPU:
        assert re.search(rf"cu(da)?{major}", req), f"{req} is not built for CUDA {major}"


def test_python_version_meets_requires_python():
    low = re.fullmatch(r">=(\d+)\.(\d+)", PROJECT["requires-python"])
    have = tuple(int(x) for x in ARGS["PYTHON_VERSION"].split("."))
    assert low and have >= (int(low[1]), int(low[2]))


@pytest.mark.parametrize(
    "needle",
    [
        'pip install --no-cache-dir ".[gpu]"',
        "COPY spark-conf spark-conf",
        "openjdk-17",
        "PYSPARK_PYTHON=",
        "https://repo1.maven.org/maven2/com/nvidia/rapids-4-spark_${SCALA_BINARY_VERSION}/${RAPIDS_VERSION}",
        "rapids-4-spark_${SCALA_BINARY_VERSION}-${RAPIDS_VERSION}.jar",
        "COPY spark-conf/getGpusResources.sh /opt/sparkRapidsPlugin/getGpusResources.sh",
    ],
)
def test_image_contents(needle):
    assert needle in DOCKERFILE


def test_discovery_script_is_where_the_gpu_profile_looks():
    conf = (ROOT / "spark-conf" / "gpu-cluster.conf").read_text()
    (script,) = re.findall(r"discoveryScript\s+(\S+)", conf)
    assert f"COPY spark-conf/getGpusResources.sh {script}" in DOCKERFILE
    assert ARGS["SCALA_BINARY_VERSION"] == "2.13"  # Spark 4 is Scala 2.13 only


def conf_values() -> dict[str, str]:
    conf = (ROOT / "spark-conf" / "gpu-cluster.conf").read_text()
    return dict(re.findall(r"^(spark\.\S+)\s+(\S+)$", conf, re.MULTILINE))


def test_python_workers_share_the_gpu_through_the_rapids_daemon():
    """The Accelerator's Python daemon gives each worker its GPU pool; it lives in the plugin's
    jar, which the workers' PYTHONPATH must name (the image's jar)."""
    conf = conf_values()
    assert conf["spark.python.daemon.module"] == "rapids.daemon"
    assert conf["spark.rapids.sql.python.gpu.enabled"] == "true"
    jar = f"/opt/sparkRapidsPlugin/{ARGS['RAPIDS_JAR']}"
    for name, value in ARGS.items():
        jar = jar.replace(f"${{{name}}}", value)
    assert conf["spark.executorEnv.PYTHONPATH"] == jar


def test_the_plugins_and_the_python_workers_pools_fit_on_one_gpu():
    conf = conf_values()
    plugin = float(conf["spark.rapids.memory.gpu.maxAllocFraction"])
    python = float(conf["spark.rapids.python.memory.gpu.maxAllocFraction"])
    assert float(conf["spark.rapids.memory.gpu.allocFraction"]) <= plugin
    assert float(conf["spark.rapids.python.memory.gpu.allocFraction"]) <= python
    assert plugin + python <= 1.0


#: The instructions a Dockerfile may hold (Docker's reference); anything else fails `docker build`.
INSTRUCTIONS = {
    "FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
    "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL",
}  # fmt: skip


def test_dockerfile_parses():
    """Without a Docker engine in CI: every logical line (continuations joined) starts with an
    instruction, the first is an ARG or FROM, COPY sources exist, and the image's command is
    the demo on whatever backend the container sees."""
    lines = re.sub(r"\\\n", " ", DOCKERFILE).splitlines()
    logical = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    words = [ln.split()[0] for ln in logical]
    assert set(words) <= INSTRUCTIONS, set(words) - INSTRUCTIONS
    assert words[0] in ("ARG", "FROM") and "FROM" in words
    for ln in logical:
        if ln.startswith("COPY"):
            for src in ln.split()[1:-1]:
                assert (ROOT / src).exists(), ln
    assert logical[-1] == 'CMD ["gpu-hamlet", "demo", "--backend", "auto"]'

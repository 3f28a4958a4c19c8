# gpu-hamlet for spark-submit on GPU clusters with the RAPIDS Accelerator for Apache Spark
# (spark-conf/gpu-cluster.conf). Build: docker build -t gpu-hamlet-gpu .
#
# Pins: the Python packages are pinned in pyproject.toml (dependencies: pyspark; the `gpu` extra:
# cudf-cu12, cupy-cuda12x, numba-cuda) and installed below as ".[gpu]". The ARGs are what pip
# cannot pin; tests/test_dockerfile.py checks that they agree with pyproject.toml: SPARK_VERSION is
# the pyspark pin, RAPIDS_VERSION is cudf-cu12's release line, CUDA_VERSION's major is the
# packages' cu12, PYTHON_VERSION meets requires-python.
ARG CUDA_VERSION=12.9.1
FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu22.04

ARG PYTHON_VERSION=3.11
ARG SPARK_VERSION=4.1.1
ARG SCALA_BINARY_VERSION=2.13
ARG RAPIDS_VERSION=26.02.1

ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl gpg-agent \
        software-properties-common \
 && add-apt-repository -y ppa:deadsnakes/ppa \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
        python${PYTHON_VERSION} python${PYTHON_VERSION}-venv \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64

# The RAPIDS Accelerator (its CUDA 12 jar, checked against Maven Central's SHA-1) and the GPU
# discovery script, where spark-conf/gpu-cluster.conf expects them.
ARG RAPIDS_JAR=rapids-4-spark_${SCALA_BINARY_VERSION}-${RAPIDS_VERSION}.jar
ARG MAVEN=https://repo1.maven.org/maven2/com/nvidia/rapids-4-spark_${SCALA_BINARY_VERSION}/${RAPIDS_VERSION}
WORKDIR /opt/sparkRapidsPlugin
RUN curl -fsSLO "${MAVEN}/${RAPIDS_JAR}" \
 && echo "$(curl -fsSL "${MAVEN}/${RAPIDS_JAR}.sha1" | cut -d' ' -f1)  ${RAPIDS_JAR}" | sha1sum -c -
COPY spark-conf/getGpusResources.sh /opt/sparkRapidsPlugin/getGpusResources.sh
RUN chmod 755 /opt/sparkRapidsPlugin/getGpusResources.sh

# Python environment: the project with its gpu extra (pyspark, pyarrow, cudf, cupy, numba-cuda).
ENV VIRTUAL_ENV=/opt/venv
RUN python${PYTHON_VERSION} -m venv ${VIRTUAL_ENV}
ENV PATH=${VIRTUAL_ENV}/bin:${PATH} \
    PYSPARK_PYTHON=${VIRTUAL_ENV}/bin/python \
    PYSPARK_DRIVER_PYTHON=${VIRTUAL_ENV}/bin/python \
    SPARK_HOME=${VIRTUAL_ENV}/lib/python${PYTHON_VERSION}/site-packages/pyspark \
    SPARK_RAPIDS_PLUGIN_JAR=/opt/sparkRapidsPlugin/${RAPIDS_JAR} \
    MALLOC_ARENA_MAX=1
WORKDIR /opt/gpu-hamlet
COPY pyproject.toml README.md ./
COPY cpu_fallback cpu_fallback
COPY gpu_hamlet gpu_hamlet
COPY spark-conf spark-conf
RUN pip install --no-cache-dir --upgrade pip \
 && pip install --no-cache-dir ".[gpu]" \
 && python -c "import pyspark; assert pyspark.__version__ == '${SPARK_VERSION}', pyspark.__version__"

# spark-submit --master spark://<host>:7077 --properties-file spark-conf/gpu-cluster.conf \
#     --jars ${SPARK_RAPIDS_PLUGIN_JAR} \
#     $(python -c 'import gpu_hamlet.spark.submit as s; print(s.__file__)') \
#     --workload ... --events ... --out ... --backend gpu
# The default command answers the demo workload: on the GPU when the container sees one
# (docker run --gpus all), else on the CPU, saying which.
CMD ["gpu-hamlet", "demo", "--backend", "auto"]

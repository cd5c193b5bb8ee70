# syntax=docker/dockerfile:1
# gpudiag's images (see docs/kubernetes.md):
#   docker build -t gpudiag:0.1.0 .                      the exporter: `gpudiag exporter` by default, not root
#   docker build --target npd -t gpudiag-npd:0.1.0 .     node-problem-detector with gpudiag as its plugin
# NVML (libnvidia-ml.so.1) is not in either image: the NVIDIA container runtime mounts the host
# driver's copy into the container (NVIDIA_DRIVER_CAPABILITIES=utility). Base images are pinned
# by version; pin them by digest too (@sha256:...) where your registry policy asks for it.
# tests/test_dockerfile.py runs every RUN below except the apt-get one, in a fresh virtual environment.
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm
ARG NPD_IMAGE=registry.k8s.io/node-problem-detector/node-problem-detector:v1.36.0

# gpudiag's wheel, built from this checkout with the pinned build backend.
FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY deploy/docker/build-requirements.txt /tmp/build-requirements.txt
RUN pip install --no-cache-dir --root-user-action=ignore --only-binary=:all: -r /tmp/build-requirements.txt
COPY pyproject.toml README.md ./
COPY gpudiag ./gpudiag
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /tmp/wheels .

# node-problem-detector's own image, with gpudiag at /usr/local/bin/gpudiag for its custom plugin
# (deploy/kubernetes/node-problem-detector/). Debian's python3 (3.11 in bookworm) runs it.
FROM ${NPD_IMAGE} AS npd
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv && rm -rf /var/lib/apt/lists/*
COPY deploy/docker/requirements.txt /tmp/requirements.txt
COPY --from=wheel /tmp/wheels /tmp/wheels
RUN python3 -m venv /opt/gpudiag \
    && /opt/gpudiag/bin/pip install --no-cache-dir --only-binary=:all: --no-binary=python-hostlist -r /tmp/requirements.txt \
    && /opt/gpudiag/bin/pip install --no-cache-dir --no-deps /tmp/wheels/gpudiag-*.whl \
    && ln -s /opt/gpudiag/bin/gpudiag /usr/local/bin/gpudiag \
    && rm -rf /tmp/wheels /tmp/requirements.txt
USER 65532:65532

# The exporter (the default target). Non-root: NVML needs only the /dev/nvidia* nodes, which the
# NVIDIA runtime makes readable; the full-attribution manifests run it as root (the kubelet's socket).
FROM ${PYTHON_IMAGE} AS exporter
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY deploy/docker/requirements.txt /tmp/requirements.txt
COPY --from=wheel /tmp/wheels /tmp/wheels
RUN python -m venv /opt/gpudiag \
    && /opt/gpudiag/bin/pip install --no-cache-dir --only-binary=:all: --no-binary=python-hostlist -r /tmp/requirements.txt \
    && /opt/gpudiag/bin/pip install --no-cache-dir --no-deps /tmp/wheels/gpudiag-*.whl \
    && rm -rf /tmp/wheels /tmp/requirements.txt
USER 65532:65532
EXPOSE 9401
ENTRYPOINT ["/opt/gpudiag/bin/gpudiag"]
CMD ["exporter", "--bind=0.0.0.0", "--port=9401"]

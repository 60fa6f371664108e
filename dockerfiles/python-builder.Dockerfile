# Builder of pure-Python components (releasekit/python-builder): no compiler, no CUDA.
#
# BASE_IMAGE comes from the manifest's build.environment.base (by digest; the lock pins
# it). The wheel build runs in a container of this image without network, so the build
# backend (setuptools, setuptools-scm, wheel) is installed here, pinned.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

ARG SETUPTOOLS_VERSION=80.9.0
ARG SETUPTOOLS_SCM_VERSION=8.3.1
ARG WHEEL_VERSION=0.45.1
ARG PACKAGING_VERSION=25.0

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Only when the base lacks python3/venv; pinned by the builder's digest in the lock (see vllm-builder).
# hadolint ignore=DL3008
RUN if ! command -v python3 >/dev/null || ! python3 -c "import venv, ensurepip" 2>/dev/null; then \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv git \
        && rm -rf /var/lib/apt/lists/*; \
    fi

# `wheels/` in the build context: a wheelhouse of exactly these pins, installed without an
# index when present (offline builders, tests); empty: the pins come from the index.
COPY wheels/ /opt/releasekit-wheels/
RUN offline=() \
    && if compgen -G "/opt/releasekit-wheels/*.whl" >/dev/null; then \
        offline=(--no-index --find-links /opt/releasekit-wheels); \
    fi \
    && python3 -m venv /opt/builder \
    && /opt/builder/bin/pip install --no-cache-dir "${offline[@]}" \
        "setuptools==${SETUPTOOLS_VERSION}" "setuptools-scm==${SETUPTOOLS_SCM_VERSION}" \
        "wheel==${WHEEL_VERSION}" "packaging==${PACKAGING_VERSION}"

ENV PATH=/opt/builder/bin:${PATH}

WORKDIR /releasekit-src

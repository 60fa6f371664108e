# Builder of the vLLM fork and the CUDA kernel libraries (releasekit/vllm-builder).
#
# releasekit builds it when the Docker Engine lacks it: BASE_IMAGE comes from the
# manifest's build.environment.base (a CUDA devel image by digest; the lock pins it),
# the other ARGs from build.environment.build_args. No ARG has a floating default: a
# build without them fails instead of picking something.
#
# The wheel build itself runs in a throw-away container of this image without network,
# so everything a build backend needs (torch, setuptools-scm, cmake, ninja) is here.
# `toolkit/` in the build context is empty unless the manifest provides a CUDA toolkit
# (the tests do: a Debian base has none); the CUDA devel base already has one.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

ARG TORCH_VERSION
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu130
ARG SETUPTOOLS_VERSION=80.9.0
ARG SETUPTOOLS_SCM_VERSION=8.3.1
ARG WHEEL_VERSION=0.45.1
ARG PACKAGING_VERSION=25.0
ARG CMAKE_VERSION=3.31.6
ARG NINJA_VERSION=1.11.1.4
ARG JINJA2_VERSION=3.1.6
ARG TORCH_CUDA_ARCH_LIST=12.0a
ARG MAX_JOBS=16
ARG NVCC_THREADS=2

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Compilers, git (setuptools-scm reads the checkout), ccache, python. Their versions are
# the distribution's of the day the builder is built: the builder is identified by its
# image digest, which the lock pins, so a rebuilt builder is a new, visible input.
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        build-essential ca-certificates ccache git python3 python3-dev python3-pip python3-venv \
    && rm -rf /var/lib/apt/lists/*

COPY toolkit/ /opt/releasekit-toolkit/
RUN if [ -x /opt/releasekit-toolkit/bin/nvcc ]; then \
        rm -rf /usr/local/cuda && ln -s /opt/releasekit-toolkit /usr/local/cuda; \
    fi \
    && /usr/local/cuda/bin/nvcc --version

# One virtual environment holds every build requirement, pinned.
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
        "wheel==${WHEEL_VERSION}" "packaging==${PACKAGING_VERSION}" "cmake==${CMAKE_VERSION}" \
        "ninja==${NINJA_VERSION}" "jinja2==${JINJA2_VERSION}" \
    && if [ -n "${TORCH_VERSION}" ]; then \
        /opt/builder/bin/pip install --no-cache-dir --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"; \
    fi

ENV PATH=/opt/builder/bin:/usr/local/cuda/bin:${PATH} \
    CUDA_HOME=/usr/local/cuda \
    VLLM_TARGET_DEVICE=cuda \
    TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST} \
    MAX_JOBS=${MAX_JOBS} \
    NVCC_THREADS=${NVCC_THREADS} \
    CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache" \
    CCACHE_DIR=/var/cache/ccache \
    CCACHE_NOHASHDIR=true \
    CCACHE_BASEDIR=/releasekit-src

WORKDIR /releasekit-src

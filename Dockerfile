# syntax=docker/dockerfile:1
# The operator's container image: `oasis operator run` as an unprivileged user (uid 65532), the
# package and its dependencies in a virtualenv built in a first stage, no compiler or pip cache in
# the final one. The Helm chart (charts/oasis-operator) runs it with a read-only root filesystem and
# /tmp as its only writable path.
#
# Not built by the test suite (no container runtime on our machines); tests/shipping/test_dockerfile.py
# checks its shape. Build and push:
#   docker build -t ghcr.io/oasis-operator/oasis-operator:0.1.0 .
# For reproducible builds, pin the bases by digest: --build-arg PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:...
# (and GOLANG_IMAGE likewise).
#
# The image also carries the GitOps back-end's git server (tools/backends/git-server, decision 0072),
# which the chart runs as a sidecar with toolPlane.gitops.enabled, and Debian's git, which that server
# runs for every fetch and push (gitkit) and the operator runs to push a scenario's repository.

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
# The Go of tools/backends/git-server/go.mod's line (go 1.26), as the local stack builds it.
ARG GOLANG_IMAGE=golang:1.26.8-bookworm

FROM ${GOLANG_IMAGE} AS git-server
WORKDIR /src
# The module's go.sum is checked on download: the image's gitkit is the one the local stack tests.
COPY tools/backends/git-server/go.mod tools/backends/git-server/go.sum ./
RUN go mod download && go mod verify
COPY tools/backends/git-server/main.go ./
# Static (no cgo), as tools/build-backends.sh builds it.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w" -o /out/oasis-git-server .

# The control plane of the target control planes (decision 0100, 0109): kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, etcd and kwok, built from their Go modules by the
# same script and versions as the local stack's (tools/build-binaries.sh); only kubectl is unused.
FROM ${GOLANG_IMAGE} AS control-plane
WORKDIR /src
COPY tools/build-binaries.sh tools/
COPY tools/k8s tools/k8s
COPY tools/etcd tools/etcd
RUN OASIS_CACHE_DIR=/cache bash tools/build-binaries.sh > /tmp/built \
 && cp -a "$(tail -n 1 /tmp/built)" /out

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The dependencies first, in a layer only pyproject.toml and the lock invalidate (decision 0108): the
# package's requirements and its `database` extra's (the chart can run the database back-end), read
# from pyproject.toml, at the locked versions CI tested (make lock). No `devcluster` extra: the image
# makes no key material.
COPY pyproject.toml .ci/constraints.txt ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; print('\n'.join(p['dependencies'] + p['optional-dependencies']['database']))" > requirements.txt \
 && python -m venv /opt/oasis \
 && /opt/oasis/bin/pip install -c constraints.txt -r requirements.txt
# Then the code, alone: a code change rebuilds this layer only, and resolves no dependency again.
COPY README.md ./
COPY oasis_operator ./oasis_operator
RUN /opt/oasis/bin/pip install --no-deps . \
 && /opt/oasis/bin/python -m compileall -q /opt/oasis/lib

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="oasis-operator" \
      org.opencontainers.image.description="Evaluates AI agents acting on Kubernetes clusters (OASIS)" \
      org.opencontainers.image.licenses="Apache-2.0"
# git, without its recommendations (ssh, less, perl modules): only upload-pack, receive-pack and the
# commands the operator's push runs (init, add, commit, push).
RUN apt-get update \
 && apt-get install -y --no-install-recommends git \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/oasis /opt/oasis
COPY --from=git-server /out/oasis-git-server /usr/local/bin/oasis-git-server
COPY --from=control-plane /out /opt/oasis-control-plane
ENV PATH=/opt/oasis/bin:$PATH \
    OASIS_BIN_DIR=/opt/oasis-control-plane \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
# 8080 metrics (/metrics), 8081 liveness (/healthz), 8443 audit webhook receiver (TLS, /audit).
EXPOSE 8080 8081 8443
USER 65532:65532
ENTRYPOINT ["oasis", "operator", "run"]

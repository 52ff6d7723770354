# The cowork sandbox image: Debian bookworm, Python 3, the in-container MCP server.
#
# BASE is a local image (cowork-base:bookworm, made offline by images/bootstrap-base.sh)
# or a public one (debian:bookworm-slim with python3 and python3-venv installed, or
# python:3.11-slim-bookworm). Python packages come from the wheelhouse in the build
# context: nothing is downloaded during the build. `cowork images build` assembles the
# context (Dockerfile, wheelhouse/, cowork/) and picks BASE.
ARG BASE=cowork-base:bookworm
FROM ${BASE}

RUN groupadd --gid 1000 agent \
 && useradd --uid 1000 --gid 1000 --home-dir /tmp --no-create-home --shell /bin/bash agent \
 && mkdir -p /workspace /opt/cowork/task /run/cowork \
 && chown agent:agent /workspace && chmod 0700 /run/cowork

COPY wheelhouse/ /tmp/wheelhouse/
RUN python3 -m venv /opt/cowork/venv \
 && /opt/cowork/venv/bin/pip install --no-index --no-cache-dir --find-links /tmp/wheelhouse \
        -r /tmp/wheelhouse/requirements.txt \
 && rm -rf /tmp/wheelhouse

COPY cowork/ /opt/cowork/lib/cowork/
# Byte-code without column tables (-X no_debug_ranges): smaller code objects, so less
# memory per idle sandbox; tracebacks keep their line numbers, only lose the ^^^ markers.
RUN /opt/cowork/venv/bin/python -X no_debug_ranges -m compileall -q -f /opt/cowork/lib /opt/cowork/venv/lib \
 && chmod -R go-w /opt/cowork

ENV PYTHONPATH=/opt/cowork/lib \
    PYTHONDONTWRITEBYTECODE=1 \
    FASTMCP_CHECK_FOR_UPDATES=off \
    FASTMCP_SHOW_SERVER_BANNER=false \
    PYTHONNODEBUGRANGES=1 \
    MALLOC_ARENA_MAX=2 \
    LANG=C.UTF-8
WORKDIR /workspace
CMD ["/opt/cowork/venv/bin/python", "-m", "cowork.server"]

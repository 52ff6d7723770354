# The cowork sandbox image: Debian bookworm, Python 3, the in-container MCP server.
#
# BASE is a local image (cowork-base:bookworm-2, made offline by images/bootstrap-base.sh)
# or a public one (debian:bookworm-slim with python3 and python3-venv installed, or
# python:3.11-slim-bookworm). Python packages come from the wheelhouse in the build
# context: nothing is downloaded during the build. `cowork images build` assembles the
# context (Dockerfile, wheelhouse/, cowork/) and picks BASE.
ARG BASE=cowork-base:bookworm-2
FROM ${BASE}

# procps (pkill, pgrep, ps): specs and probes use them. The offline base has it; a public
# base gets it from apt when the build can reach a mirror, else the build stops here.
RUN command -v pkill >/dev/null || { \
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends procps \
         && rm -rf /var/lib/apt/lists/*) >/dev/null 2>&1 \
        || { echo "cowork: the base image has no pkill/pgrep (procps) and apt-get could not install it;" \
                  "use the offline base (images/bootstrap-base.sh, which includes procps) or a base with procps" >&2; \
             exit 1; }; }

# The task layer (/opt/cowork/task) is root's alone: only the server reads it. No setuid or
# setgid bits anywhere (no-new-privileges makes them inert already; now there are none).
RUN groupadd --gid 1000 agent \
 && useradd --uid 1000 --gid 1000 --home-dir /tmp --no-create-home --shell /bin/bash agent \
 && mkdir -p /workspace /opt/cowork/task /run/cowork \
 && chown agent:agent /workspace && chmod 0700 /run/cowork /opt/cowork/task \
 && find / -xdev -perm /6000 -type f -exec chmod ug-s {} +

# The office readers (openpyxl, python-docx, pypdf) go to /opt/cowork/office, on the path of
# both the server's Python (read_document) and the system python3 the agent's code runs in.
COPY wheelhouse/ /tmp/wheelhouse/
RUN python3 -m venv /opt/cowork/venv \
 && /opt/cowork/venv/bin/pip install --no-index --no-cache-dir --find-links /tmp/wheelhouse \
        -r /tmp/wheelhouse/requirements.txt \
 && /opt/cowork/venv/bin/pip install --no-index --no-cache-dir --find-links /tmp/wheelhouse \
        --target /opt/cowork/office -r /tmp/wheelhouse/office.txt \
 && for py in /opt/cowork/venv/bin/python python3; do \
        site=$("$py" -c 'import site; print(site.getsitepackages()[0])') \
        && mkdir -p "$site" && echo /opt/cowork/office > "$site/cowork-office.pth" || exit 1; done \
 && rm -rf /tmp/wheelhouse

COPY cowork/ /opt/cowork/lib/cowork/
# cowork-asagent (server/asagent.c, built on the host; absent without a C compiler there):
# drops to the agent's ids and execs, as setpriv does, without a dynamic loader.
COPY bin/ /opt/cowork/bin/
# Byte-code without column tables (-X no_debug_ranges): smaller code objects, so less
# memory per idle sandbox; tracebacks keep their line numbers, only lose the ^^^ markers.
# The tool catalog: every tool as fastmcp lists it, so the server answers tools/list
# without importing fastmcp (server.catalog).
RUN /opt/cowork/venv/bin/python -X no_debug_ranges -m compileall -q -f /opt/cowork/lib /opt/cowork/venv/lib \
 && PYTHONPATH=/opt/cowork/lib FASTMCP_CHECK_FOR_UPDATES=off /opt/cowork/venv/bin/python -m cowork.server.catalog_build /opt/cowork/catalog.json \
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

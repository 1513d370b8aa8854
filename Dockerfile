# syntax=docker/dockerfile:1
#
# One image for every process of the platform. SERVICE picks which one runs:
#   identity | campaign | brand-guide | analytics | ingestion | delivery | gateway
#
#   docker build -t mail-platform .
#   docker run -e SERVICE=identity -e DATABASE_URL=postgres://... mail-platform
#   docker build --build-arg SERVICE=campaign -t mail-campaign .   # bakes a default
#
# Stages: deps (production node_modules) and build (all dependencies, then
# npm run build) run in parallel; runtime gets the production node_modules and
# the built packages, without sources, tests or dev tools.

# Node 24 LTS (20 reached its end of life in April 2026); the suite also passes on Node 20.19+.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS base
WORKDIR /app
ENV npm_config_update_notifier=false \
    npm_config_fund=false \
    npm_config_audit=false

# The lockfile and every workspace's package.json: dependency layers are
# rebuilt only when one of them changes. (deploy/test checks that this list
# matches the workspaces of package.json.)
FROM base AS manifests
COPY package.json package-lock.json ./
COPY proto/package.json proto/
COPY services/common/package.json services/common/
COPY services/event-store/package.json services/event-store/
COPY services/identity/package.json services/identity/
COPY services/campaign/package.json services/campaign/
COPY services/brand-guide/package.json services/brand-guide/
COPY services/ingestion/package.json services/ingestion/
COPY services/analytics/package.json services/analytics/
COPY services/delivery/package.json services/delivery/
COPY gateway/package.json gateway/
COPY deploy/local/package.json deploy/local/

# Install scripts stay off, as on the developers' machines (npm 11 runs only
# approved ones and none are): the binaries we need (buf) come as platform
# packages, and the remaining scripts are version checks and telemetry.
FROM manifests AS deps
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --ignore-scripts

FROM manifests AS build
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts
COPY . .
RUN npm run build
# The runtime tree: each workspace without its sources, tests and build
# configuration. Everything else stays: dist/ and the files read at run time
# (services/common/proto, gateway/openapi, gateway/dashboard/dist).
RUN set -eu; \
    for ws in proto services/common services/event-store services/identity services/campaign services/brand-guide \
              services/ingestion services/analytics services/delivery gateway; do \
      mkdir -p "/out/$ws"; \
      cp -a "$ws/." "/out/$ws/"; \
      rm -rf "/out/$ws/src" "/out/$ws/test" "/out/$ws/node_modules" /out/$ws/tsconfig*.json /out/$ws/*.tsbuildinfo; \
    done

FROM base AS runtime
# Package managers are not needed to run the processes.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
           /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* \
           /usr/local/bin/yarn /usr/local/bin/yarnpkg

# Starts the process named by SERVICE (exec: node gets the signals directly).
COPY --chmod=0755 <<'EOF' /usr/local/bin/mail-process
#!/bin/sh
set -eu
case "${SERVICE:-}" in
  gateway) exec node /app/gateway/dist/main.js "$@" ;;
  identity | campaign | brand-guide | analytics | ingestion | delivery) exec node "/app/services/$SERVICE/dist/main.js" "$@" ;;
  *)
    echo "mail-process: set SERVICE to one of identity, campaign, brand-guide, analytics, ingestion, delivery, gateway (got '${SERVICE:-}')" >&2
    exit 64
    ;;
esac
EOF

# Container health: GET /readyz of this container's process, the gateway on
# PORT, a service on its ops port (OPS_PORT, defaults of docs/CONVENTIONS.md).
COPY --chmod=0755 <<'EOF' /usr/local/bin/mail-healthcheck
#!/usr/bin/env node
const opsPorts = { identity: 9101, campaign: 9102, 'brand-guide': 9103, analytics: 9104, ingestion: 9105, delivery: 9106 };
const service = process.env.SERVICE ?? '';
const port = service === 'gateway' ? process.env.PORT || 8080 : process.env.OPS_PORT || opsPorts[service];
if (!port) {
  console.error(`mail-healthcheck: unknown SERVICE '${service}'`);
  process.exit(1);
}
fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(4000) }).then(
  (response) => process.exit(response.ok ? 0 : 1),
  () => process.exit(1),
);
EOF

COPY --from=deps /app /app
COPY --from=build /out /app

ARG SERVICE=
ENV SERVICE=${SERVICE} \
    NODE_ENV=production
# The node user of the official image, by number so that Kubernetes can
# verify runAsNonRoot. The files stay root-owned: the processes only read them.
USER 1000:1000
EXPOSE 8080 50051-50056 9100-9106
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["mail-healthcheck"]
CMD ["mail-process"]

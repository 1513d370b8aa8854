import path from 'node:path';
import express, { type Express } from 'express';
import type { Logger, Readiness } from '@mail/common';
import type { ServiceClients } from './clients';
import { authenticate, authorize, authorizeNamedWorkspace } from './auth/access';
import type { Authenticator } from './auth/principal';
import type { DashboardConfig } from './config';
import { errorHandler } from './errors/handler';
import { notFound } from './errors/http-error';
import { fairUse, userRate, type FairUseLimits } from './limits/fair-use';
import { bodyTimeout, type RequestTimeouts } from './limits/request-timeout';
import { httpMetrics } from './metrics';
import { operationMatcher, type MatchedOperation, type OpenApiDocument } from './openapi/document';
import { isJsonBody, verifyJsonBody } from './pydantic/json-body';
import { pydanticValidation } from './pydantic/validation';
import { requestLog } from './request-log';
import { routeModules } from './routes';
import { dashboardRouter } from './routes/dashboard';
import { isWebhookPath } from './webhook/router';

export interface AppDependencies {
  document: OpenApiDocument;
  clients: ServiceClients;
  authenticator: Authenticator;
  readiness: Readiness;
  logger: Logger;
  /** The dashboard's sign-in settings; without them the page takes a pasted token. */
  dashboard?: DashboardConfig;
  /**
   * Routes that read their body raw (the signed webhook) or not at all (one-click unsubscribe, first-party
   * tracking), mounted before JSON parsing.
   */
  rawBodyRoutes?: express.Router;
  /** How long a body may take to arrive before the answer is 408; without them only Node's own limits apply. */
  timeouts?: RequestTimeouts;
  /** Each user's rate and each workspace's concurrent analytics reads (429 past them); without them, no limit. */
  fairUse?: FairUseLimits;
  /** TRUSTED_PROXIES; none: X-Forwarded-For is never read, whoever sends it. */
  trustedProxies?: string[];
}

/**
 * The public request pipeline: health, docs and the dashboard page; raw-body routes; JSON parsing; token
 * check (401); the user's rate (429); workspace and role check (403/404) once the workspace header or path
 * is valid; OpenAPI validation (422); the workspace and role check of a request whose workspace id only
 * validation could read; the workspace's analytics reads (429); the route; errors in the API's format
 * (docs/api.md, "Errors").
 */
export function createApp(deps: AppDependencies): Express {
  const app = express();
  app.disable('x-powered-by');
  // A client address (tracking's machine rules, logs) comes from X-Forwarded-For only as the configured proxies
  // set it: trusting every hop would let any client name its own address.
  app.set('trust proxy', deps.trustedProxies && deps.trustedProxies.length > 0 ? deps.trustedProxies : false);
  // Express, the validator and the access check must match a path the same way, or a request could be
  // routed to a handler without its documented access check: exact case, exact trailing slash.
  app.set('case sensitive routing', true);
  app.set('strict routing', true);
  const matchOperation = operationMatcher(deps.document);
  app.use(httpMetrics);
  app.use(requestLog(deps.logger));
  if (deps.timeouts) app.use(bodyTimeout(deps.timeouts, (req) => isWebhookPath(req.path)));

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  // The body lists each dependency with its state (docs/api.md, "Health and operations"); /metrics is on the ops port (OPS_PORT).
  app.get('/readyz', async (_req, res) => {
    const report = await deps.readiness.check();
    res.status(report.ready ? 200 : 503).json({ status: report.ready ? 'ready' : 'not ready', ...report });
  });
  app.get('/openapi.json', (_req, res) => {
    res.json(deps.document);
  });
  app.get('/docs', (_req, res) => {
    res.type('html').send(DOCS_PAGE);
  });
  app.use('/docs/assets', express.static(SWAGGER_UI_ASSETS, { index: false, maxAge: '1d' }));
  app.use(dashboardRouter(undefined, deps.dashboard));

  if (deps.rawBodyRoutes) app.use(deps.rawBodyRoutes);

  app.use(redirectSlashes(matchOperation));
  app.use(express.json({ limit: '1mb', strict: false, type: isJsonBody, verify: verifyJsonBody }));
  // A body of any other type is kept as text: FastAPI reads it as bytes, which fail the model's type check.
  app.use(express.text({ limit: '1mb', type: () => true }));
  app.use(authenticate(deps.authenticator, deps.clients.principals, matchOperation));
  if (deps.fairUse) app.use(userRate(deps.fairUse));
  app.use(authorizeNamedWorkspace);
  app.use(pydanticValidation(deps.document, matchOperation));
  app.use(authorize);
  if (deps.fairUse) app.use(fairUse(deps.fairUse));

  const router = express.Router({ caseSensitive: true, strict: true });
  for (const register of routeModules) register(router, { clients: deps.clients, logger: deps.logger });
  app.use(router);

  app.use(() => {
    throw notFound();
  });
  app.use(errorHandler(deps.logger));
  return app;
}

/**
 * FastAPI's redirect_slashes: a path documented only with (or without) a
 * trailing slash answers 307 to the documented spelling, keeping the query.
 */
function redirectSlashes(matchOperation: (method: string, path: string) => MatchedOperation | undefined): express.RequestHandler {
  return (req, res, next) => {
    if (req.path === '/' || matchOperation(req.method, req.path)) return next();
    const other = req.path.endsWith('/') ? req.path.slice(0, -1) : `${req.path}/`;
    if (!matchOperation(req.method, other)) return next();
    // Path and query only: a Location built from Host or X-Forwarded-Proto would let a forged header send the client elsewhere.
    res
      .status(307)
      .location(other + req.url.slice(req.path.length))
      .end();
  };
}

/** The package's folder: its main module would load the whole Swagger UI bundle into the gateway just to say where it is. */
const SWAGGER_UI_ASSETS = path.dirname(require.resolve('swagger-ui-dist/package.json'));

/** Human docs: Swagger UI (served from the swagger-ui-dist package, no CDN) rendering /openapi.json. */
const DOCS_PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>Email campaign platform API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui' });</script></body></html>`;

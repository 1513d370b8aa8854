import path from 'node:path';
import express, { type Express } from 'express';
import { registry, type Logger, type Readiness } from '@mail/common';
import type { ServiceClients } from './clients';
import { authenticate, authorize } from './auth/access';
import type { Authenticator } from './auth/principal';
import type { DashboardConfig } from './config';
import { errorHandler } from './errors/handler';
import { notFound } from './errors/http-error';
import { httpMetrics } from './metrics';
import { operationMatcher, type MatchedOperation, type OpenApiDocument } from './openapi/document';
import { isJsonBody, verifyJsonBody } from './pydantic/json-body';
import { pydanticValidation } from './pydantic/validation';
import { routeModules } from './routes';
import { dashboardRouter } from './routes/dashboard';

export interface AppDependencies {
  document: OpenApiDocument;
  clients: ServiceClients;
  authenticator: Authenticator;
  readiness: Readiness;
  logger: Logger;
  /** The dashboard's sign-in settings; without them the page takes a pasted token. */
  dashboard?: DashboardConfig;
  /** Routes that read their body raw (the signed webhook), mounted before JSON parsing. */
  rawBodyRoutes?: express.Router;
}

/**
 * The request pipeline: health, docs and the dashboard page; raw-body routes; JSON parsing; token
 * check (401); OpenAPI validation (422); workspace and role check (403/404);
 * the route; errors in the API's format (docs/api.md, "Errors").
 */
export function createApp(deps: AppDependencies): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', true);
  // Express, the validator and the access check must match a path the same way, or a request could be
  // routed to a handler without its documented access check: exact case, exact trailing slash.
  app.set('case sensitive routing', true);
  app.set('strict routing', true);
  const matchOperation = operationMatcher(deps.document);
  app.use(httpMetrics);

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', async (_req, res) => {
    const report = await deps.readiness.check();
    res.status(report.ready ? 200 : 503).json({ status: report.ready ? 'ready' : 'not ready', ...report });
  });
  app.get('/metrics', async (_req, res) => {
    res.type(registry.contentType).send(await registry.metrics());
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
  app.use(pydanticValidation(deps.document, matchOperation));
  app.use(authorize);

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
    // As Starlette redirects: the absolute URL (from the Host header), no body.
    const target = other + req.url.slice(req.path.length);
    const host = req.get('host');
    res
      .status(307)
      .location(host ? `${req.protocol}://${host}${target}` : target)
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

import express, { type Express } from 'express';
import { getAbsoluteFSPath as swaggerUiAssetPath } from 'swagger-ui-dist';
import * as OpenApiValidator from 'express-openapi-validator';
import { registry, type Logger, type Readiness } from '@mail/common';
import type { ServiceClients } from './clients';
import { authenticate, authorize } from './auth/access';
import type { Authenticator } from './auth/principal';
import { errorHandler } from './errors/handler';
import { notFound } from './errors/http-error';
import { httpMetrics } from './metrics';
import { operationMatcher, type OpenApiDocument } from './openapi/document';
import { routeModules } from './routes';

export interface AppDependencies {
  document: OpenApiDocument;
  clients: ServiceClients;
  authenticator: Authenticator;
  readiness: Readiness;
  logger: Logger;
  /** Routes that read their body raw (the signed webhook), mounted before JSON parsing. */
  rawBodyRoutes?: express.Router;
}

/**
 * The request pipeline: health and docs; raw-body routes; JSON parsing; token
 * check (401); OpenAPI validation (422); workspace and role check (403/404);
 * the route; errors in the contract's format.
 */
export function createApp(deps: AppDependencies): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', true);
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
  app.use('/docs/assets', express.static(swaggerUiAssetPath(), { index: false, maxAge: '1d' }));

  if (deps.rawBodyRoutes) app.use(deps.rawBodyRoutes);

  app.use(express.json({ limit: '1mb', strict: false, type: ['application/json', 'application/*+json'] }));
  app.use(authenticate(deps.authenticator, deps.clients.identity, operationMatcher(deps.document)));
  app.use(
    OpenApiValidator.middleware({
      apiSpec: deps.document as never,
      validateRequests: { allErrors: true },
      validateResponses: false,
      validateSecurity: false,
      ignoreUndocumented: false,
    }),
  );
  app.use(authorize);

  const router = express.Router();
  for (const register of routeModules) register(router, { clients: deps.clients, logger: deps.logger });
  app.use(router);

  app.use(() => {
    throw notFound();
  });
  app.use(errorHandler(deps.logger));
  return app;
}

/** Human docs: Swagger UI (served from the swagger-ui-dist package, no CDN) rendering /openapi.json. */
const DOCS_PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>Email campaign platform API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui' });</script></body></html>`;

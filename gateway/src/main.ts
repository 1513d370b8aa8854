// First: tracing patches the modules the imports below load (@mail/common, tracing).
import '@mail/common/tracing';
import http from 'node:http';
import express from 'express';
import { ConfigError, createLogger, onShutdown, startOpsServer } from '@mail/common';
import { createApp } from './app';
import { createJwtAuthenticator } from './auth/jwt';
import { devAuthenticator } from './auth/principal';
import { closeServiceClients, createServiceClients } from './clients';
import { readGatewayConfig, type GatewayConfig } from './config';
import { answerClientError } from './errors/client-error';
import { gatewayReadiness } from './health';
import { serverTimeoutOptions } from './limits/request-timeout';
import { loadOpenApiDocument } from './openapi/document';
import { trackingRouter } from './tracking/router';
import { unsubscribeRouter } from './unsubscribe/router';
import { createWebhook } from './webhook';

function readConfigOrExit(): GatewayConfig {
  try {
    return readGatewayConfig();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    createLogger('gateway').fatal(`refusing to start: ${error.message}`);
    process.exit(2);
  }
}

async function main(): Promise<void> {
  const config = readConfigOrExit();
  const logger = createLogger('gateway', config.logLevel);
  if (config.unsubscribeSigningKey === undefined) {
    logger.warn('UNSUBSCRIBE_SIGNING_KEY unset: every one-click unsubscribe link answers 404');
  }
  if (config.trackingSigningKey === undefined) {
    logger.warn('TRACKING_SIGNING_KEY unset: every open pixel and tracked link answers 404');
  }
  if (config.auth.devAuthEnabled) {
    logger.warn('DEV_AUTH_ENABLED=1: token checks are OFF, every request acts as dev@example.com (platform admin)');
  }
  const clients = createServiceClients(config.services, logger);
  const webhook = createWebhook(config.webhook, logger);
  const jwt = config.auth.devAuthEnabled ? undefined : createJwtAuthenticator(config.auth, logger);
  const health = gatewayReadiness(config.services, webhook.checkKafka, jwt?.checkProvider);
  // Both publish events and read no JSON body: mounted before body parsing and authentication.
  const rawBodyRoutes = express
    .Router()
    .use(
      webhook.router,
      unsubscribeRouter({ signingKey: config.unsubscribeSigningKey, publisher: webhook.publisher }),
      trackingRouter({ signingKey: config.trackingSigningKey, publisher: webhook.publisher, logger }),
    );
  const app = createApp({
    document: loadOpenApiDocument(),
    clients,
    authenticator: jwt ?? devAuthenticator,
    readiness: health.readiness,
    dashboard: config.dashboard,
    logger,
    rawBodyRoutes,
    timeouts: config.timeouts,
    fairUse: config.fairUse,
    trustedProxies: config.trustedProxies,
  });
  const server = http
    .createServer(serverTimeoutOptions(config.timeouts), app)
    .listen(config.port, () => logger.info({ port: config.port }, 'gateway listening'));
  server.keepAliveTimeout = 65_000;
  server.on('clientError', answerClientError);
  const opsServer = await startOpsServer(config.opsPort, health.readiness);

  onShutdown(logger, config.shutdownTimeoutMs, [
    { name: 'mark not ready', run: () => Promise.resolve(health.readiness.markDraining()) },
    { name: 'drain HTTP', run: () => new Promise((resolve) => server.close(resolve)) },
    { name: 'close ops server', run: () => new Promise((resolve) => opsServer.close(resolve)) },
    { name: 'close kafka producer', run: () => webhook.close() },
    {
      name: 'close gRPC clients',
      run: () => {
        closeServiceClients(clients);
        health.close();
        jwt?.stop();
        return Promise.resolve();
      },
    },
  ]);
}

void main();

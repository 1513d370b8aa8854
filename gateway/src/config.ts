import type { KeyObject } from 'node:crypto';
import { ConfigError, EnvReader } from '@mail/common';
import { parseSendgridPublicKey } from './webhook/auth';

export interface AuthConfig {
  /** DEV_AUTH_ENABLED=1: no token checks, every request acts as the mock platform admin. */
  devAuthEnabled: boolean;
  /** Unset: the JWKS named by AUTH_ISSUER's OpenID Connect discovery document. */
  jwksUrl?: string;
  issuer?: string;
  audience?: string;
}

/** What the dashboard page needs to sign in; public, no secret (served at /dashboard/config.json). */
export interface DashboardConfig {
  /** The OpenID Connect issuer the page signs in with (AUTH_ISSUER). */
  issuer?: string;
  /** DASHBOARD_OIDC_CLIENT_ID, a public client (authorization code with PKCE); unset, the page takes a pasted token. */
  clientId?: string;
  scopes: string;
  /** DASHBOARD_OIDC_EXTRA_PARAMS: a query string added to the authorization request (e.g. audience=... or resource=...). */
  extraParams: Record<string, string>;
  /** Pasting a token: in development (DEV_AUTH_ENABLED=1) or without a client id. */
  tokenPaste: boolean;
}

export interface WebhookConfig {
  /** SendGrid's signed event webhook key, parsed from SENDGRID_WEBHOOK_PUBLIC_KEY (base64 DER or PEM, P-256). */
  sendgridPublicKey?: KeyObject;
  /** `user:password` for HTTP Basic on the webhook. */
  basicAuth?: string;
  kafkaBrokers: string[];
  eventsTopic: string;
  /** Used when the gateway creates the events topic. */
  topicPartitions: number;
  topicReplicationFactor: number;
  /** How long a webhook call waits for Kafka's acknowledgement before answering 503. */
  publishTimeoutMs: number;
}

export interface GatewayConfig {
  port: number;
  production: boolean;
  logLevel: string;
  shutdownTimeoutMs: number;
  auth: AuthConfig;
  dashboard: DashboardConfig;
  webhook: WebhookConfig;
  services: { identity: string; campaign: string; brandGuide: string; analytics: string };
}

/** Reads and checks the gateway's configuration; refuses unsafe production setups. */
export function readGatewayConfig(env = new EnvReader()): GatewayConfig {
  const production = env.string('NODE_ENV', 'development') === 'production';
  const auth: AuthConfig = {
    devAuthEnabled: env.bool('DEV_AUTH_ENABLED'),
    jwksUrl: env.optionalString('AUTH_JWKS_URL'),
    issuer: env.optionalString('AUTH_ISSUER'),
    audience: env.optionalString('AUTH_AUDIENCE'),
  };
  if (auth.devAuthEnabled && production) {
    throw new ConfigError('DEV_AUTH_ENABLED=1 is refused when NODE_ENV=production: it would skip token checks');
  }
  if (!auth.devAuthEnabled && (!auth.issuer || !auth.audience)) {
    throw new ConfigError('AUTH_ISSUER and AUTH_AUDIENCE must be set (or DEV_AUTH_ENABLED=1 outside production)');
  }
  const clientId = env.optionalString('DASHBOARD_OIDC_CLIENT_ID');
  const dashboard: DashboardConfig = {
    issuer: auth.issuer,
    clientId,
    scopes: env.string('DASHBOARD_OIDC_SCOPES', 'openid profile email'),
    extraParams: Object.fromEntries(new URLSearchParams(env.optionalString('DASHBOARD_OIDC_EXTRA_PARAMS') ?? '')),
    tokenPaste: auth.devAuthEnabled || clientId === undefined,
  };
  if (clientId !== undefined && !auth.issuer)
    throw new ConfigError('DASHBOARD_OIDC_CLIENT_ID needs AUTH_ISSUER, the issuer it signs in with');
  const publicKey = env.optionalString('SENDGRID_WEBHOOK_PUBLIC_KEY');
  const webhook: WebhookConfig = {
    sendgridPublicKey: publicKey === undefined ? undefined : parseSendgridPublicKey(publicKey),
    basicAuth: env.optionalString('WEBHOOK_BASIC_AUTH'),
    kafkaBrokers: env.list('KAFKA_BROKERS', ['127.0.0.1:59092']),
    eventsTopic: env.string('KAFKA_EVENTS_TOPIC', 'engagement-events'),
    topicPartitions: env.int('KAFKA_TOPIC_PARTITIONS', 6),
    topicReplicationFactor: env.int('KAFKA_TOPIC_REPLICATION_FACTOR', 1),
    publishTimeoutMs: env.int('WEBHOOK_PUBLISH_TIMEOUT_MS', 10_000),
  };
  if (production && !webhook.sendgridPublicKey && !webhook.basicAuth) {
    throw new ConfigError('In production SENDGRID_WEBHOOK_PUBLIC_KEY or WEBHOOK_BASIC_AUTH must be set');
  }
  if (webhook.basicAuth !== undefined && !webhook.basicAuth.includes(':')) {
    throw new ConfigError('WEBHOOK_BASIC_AUTH must look like user:password');
  }
  return {
    port: env.int('PORT', 8080),
    production,
    logLevel: env.string('LOG_LEVEL', 'info'),
    shutdownTimeoutMs: env.int('SHUTDOWN_TIMEOUT_MS', 10_000),
    auth,
    dashboard,
    webhook,
    services: {
      identity: env.string('IDENTITY_GRPC_ADDR', '127.0.0.1:50051'),
      campaign: env.string('CAMPAIGN_GRPC_ADDR', '127.0.0.1:50052'),
      brandGuide: env.string('BRAND_GUIDE_GRPC_ADDR', '127.0.0.1:50053'),
      analytics: env.string('ANALYTICS_GRPC_ADDR', '127.0.0.1:50054'),
    },
  };
}

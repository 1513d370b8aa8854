import { ConfigError, EnvReader, checkTopicSettings, type TopicSettings } from '@mail/common';
import type { FairUseLimits } from './limits/fair-use';
import type { RequestTimeouts } from './limits/request-timeout';
import type { ConfiguredProvider } from './webhook/declaration';
import { PROVIDERS } from './webhook/providers';

export interface AuthConfig {
  /** DEV_AUTH_ENABLED=1, the one insecure mode: no token checks (every request acts as the mock platform admin), unverified webhooks. */
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
  /** Every provider of gateway/src/webhook/providers, with the values of its variables. */
  providers: ConfiguredProvider[];
  /** A provider without its credential is not served (404), unless DEV_AUTH_ENABLED=1, the one explicit insecure mode. */
  requireCredentials: boolean;
  kafkaBrokers: string[];
  eventsTopic: string;
  /** Used when the gateway creates the events topic. */
  topicSettings: TopicSettings;
  /** How long a webhook call waits for Kafka's acknowledgement before answering 503. */
  publishTimeoutMs: number;
}

export interface GatewayConfig {
  port: number;
  /** The side door for operators: /metrics and the detailed /readyz, kept off the public port. */
  opsPort: number;
  production: boolean;
  logLevel: string;
  shutdownTimeoutMs: number;
  timeouts: RequestTimeouts;
  fairUse: FairUseLimits;
  auth: AuthConfig;
  dashboard: DashboardConfig;
  webhook: WebhookConfig;
  /** Verifies one-click unsubscribe links (UNSUBSCRIBE_SIGNING_KEY, the key delivery signs them with); unset, none verifies. */
  unsubscribeSigningKey?: string;
  /** Verifies first-party open pixels and tracked links (TRACKING_SIGNING_KEY, the key delivery signs them with). */
  trackingSigningKey?: string;
  /**
   * TRUSTED_PROXIES: the proxies whose X-Forwarded-For gives a request's client address (addresses, CIDR ranges,
   * or Express's names loopback, linklocal, uniquelocal); empty: none, the socket's address is the client's.
   */
  trustedProxies: string[];
  services: { identity: string; campaign: string; brandGuide: string; analytics: string; delivery: string };
}

/** "A or B, C, D or E": each provider's credentials, any one of which enables it. */
function credentialList(): string {
  const each = PROVIDERS.map((provider) =>
    provider.variables
      .filter((variable) => variable.credential)
      .map((variable) => variable.name)
      .join(' or '),
  );
  return `${each.slice(0, -1).join(', ')} or ${each.at(-1)}`;
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
  const webhook: WebhookConfig = {
    providers: PROVIDERS.map((provider) => provider.configure(env)),
    // Whatever NODE_ENV says: a deployment that forgets it must not take unverified events.
    requireCredentials: !auth.devAuthEnabled,
    kafkaBrokers: env.list('KAFKA_BROKERS', ['127.0.0.1:29092']),
    eventsTopic: env.string('KAFKA_EVENTS_TOPIC', 'engagement-events'),
    topicSettings: checkTopicSettings({
      partitions: env.int('KAFKA_TOPIC_PARTITIONS', 6),
      replicationFactor: env.int('KAFKA_TOPIC_REPLICATION_FACTOR', 1),
      minInsyncReplicas: env.optionalInt('KAFKA_TOPIC_MIN_INSYNC_REPLICAS'),
    }),
    publishTimeoutMs: env.int('WEBHOOK_PUBLISH_TIMEOUT_MS', 10_000),
  };
  if (production && !webhook.providers.some((provider) => provider.credentialed)) {
    throw new ConfigError(`In production at least one webhook provider needs its credential: ${credentialList()}`);
  }
  const trackingSigningKey = env.optionalString('TRACKING_SIGNING_KEY');
  if (production && trackingSigningKey === undefined) {
    throw new ConfigError('TRACKING_SIGNING_KEY must be set in production: first-party open pixels and tracked links verify with it');
  }
  const timeouts: RequestTimeouts = {
    requestMs: env.int('REQUEST_TIMEOUT_MS', 30_000),
    webhookMs: env.int('WEBHOOK_REQUEST_TIMEOUT_MS', 120_000),
  };
  if (timeouts.requestMs <= 0 || timeouts.webhookMs < timeouts.requestMs) {
    throw new ConfigError('REQUEST_TIMEOUT_MS must be positive, and WEBHOOK_REQUEST_TIMEOUT_MS at least as long');
  }
  // Per gateway replica: see FairUseLimits.
  const fairUse: FairUseLimits = {
    workspaceAnalyticsReads: env.int('WORKSPACE_ANALYTICS_CONCURRENCY', 16),
    userRequestsPerSecond: env.int('USER_RATE_LIMIT_PER_SECOND', 200),
    userBurst: env.int('USER_RATE_LIMIT_BURST', 1_000),
  };
  if (Object.values(fairUse).some((limit) => limit < 1)) {
    throw new ConfigError('WORKSPACE_ANALYTICS_CONCURRENCY, USER_RATE_LIMIT_PER_SECOND and USER_RATE_LIMIT_BURST must be at least 1');
  }
  return {
    port: env.int('PORT', 8080),
    opsPort: env.int('OPS_PORT', 9100),
    production,
    logLevel: env.string('LOG_LEVEL', 'info'),
    shutdownTimeoutMs: env.int('SHUTDOWN_TIMEOUT_MS', 10_000),
    timeouts,
    fairUse,
    auth,
    dashboard,
    webhook,
    unsubscribeSigningKey: env.optionalString('UNSUBSCRIBE_SIGNING_KEY'),
    trackingSigningKey,
    trustedProxies: env
      .string('TRUSTED_PROXIES', '')
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== ''),
    services: {
      identity: env.string('IDENTITY_GRPC_ADDR', '127.0.0.1:50051'),
      campaign: env.string('CAMPAIGN_GRPC_ADDR', '127.0.0.1:50052'),
      brandGuide: env.string('BRAND_GUIDE_GRPC_ADDR', '127.0.0.1:50053'),
      analytics: env.string('ANALYTICS_GRPC_ADDR', '127.0.0.1:50054'),
      delivery: env.string('DELIVERY_GRPC_ADDR', '127.0.0.1:50056'),
    },
  };
}

import { GRPC_ADDRESS_VARIABLES, infraEnv } from '@mail/local';

/** Nothing listens on port 1: a call to a service the test did not start fails at once. */
export const UNREACHABLE = '127.0.0.1:1';

/** Every service's address variable set to UNREACHABLE, never the default of another stack's service. */
export function unreachableServices(): Record<string, string> {
  return Object.fromEntries(Object.values(GRPC_ADDRESS_VARIABLES).map((variable) => [variable, UNREACHABLE]));
}

/**
 * The environment of an in-process gateway in a test (DEV_AUTH_ENABLED=1):
 * the broker the test command exported and the services of `env`, the others
 * unreachable. The gateway's own defaults are those of `npm run up`'s stack,
 * which a test must not reach.
 */
export function gatewayTestEnv(env: Record<string, string> = {}): Record<string, string> {
  return { DEV_AUTH_ENABLED: '1', KAFKA_BROKERS: infraEnv().kafkaBrokers.join(','), ...unreachableServices(), ...env };
}

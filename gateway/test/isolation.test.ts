import { EnvReader } from '@mail/common';
import { readGatewayConfig } from '../src/config';
import { UNREACHABLE, gatewayTestEnv } from './support/env';

/** The in-process gateways of the tests reach the broker the test command exported, and no default service address. */

let saved: string | undefined;
beforeEach(() => {
  saved = process.env.KAFKA_BROKERS;
  process.env.KAFKA_BROKERS = '127.0.0.1:28092';
});
afterEach(() => {
  if (saved === undefined) delete process.env.KAFKA_BROKERS;
  else process.env.KAFKA_BROKERS = saved;
});

test('a test gateway publishes to the exported broker and dials only the services it is given', () => {
  const config = readGatewayConfig(new EnvReader(gatewayTestEnv({ CAMPAIGN_GRPC_ADDR: '127.0.0.1:45001' })));
  expect(config.webhook.kafkaBrokers).toEqual(['127.0.0.1:28092']);
  expect(config.services).toEqual({
    identity: UNREACHABLE,
    campaign: '127.0.0.1:45001',
    brandGuide: UNREACHABLE,
    analytics: UNREACHABLE,
    delivery: UNREACHABLE,
  });
});

test('a test gateway refuses to start when the broker is not exported', () => {
  delete process.env.KAFKA_BROKERS;
  expect(() => gatewayTestEnv()).toThrow('KAFKA_BROKERS not set');
});

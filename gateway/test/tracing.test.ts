import crypto from 'node:crypto';
import fs from 'node:fs';
import {
  awaitGoTools,
  GO_TOOLS_TIMEOUT_MS,
  jaegerEnv,
  newTraceparent,
  operationSpans,
  traceSpans,
  uniqueSuffix,
  type TraceSpan,
} from '@mail/local';
import { startPrivateStack, type PrivateStack } from './support/private-stack';
import { keyPair, post, sendgridEvent, signedHeaders } from './webhook-support';

/**
 * Traces across every hop, read back from a real trace backend (Jaeger, as
 * `infra.sh up jaeger` runs it): every process of the stack exports to it over
 * OTLP/HTTP. Each request carries a traceparent of the test's own, so its
 * trace id is known.
 */
jest.setTimeout(240_000);

const jaeger = jaegerEnv();
const keys = keyPair();
const BASIC = 'sendgrid:tracing-secret';
const run = uniqueSuffix();
let isolated: PrivateStack;

beforeAll(async () => {
  await awaitGoTools();
  isolated = await startPrivateStack('tracing', {
    env: {
      LOG_LEVEL: 'debug',
      SENDGRID_WEBHOOK_PUBLIC_KEY: keys.publicKeyBase64,
      WEBHOOK_BASIC_AUTH: BASIC,
      OTEL_EXPORTER_OTLP_ENDPOINT: jaeger.otlpEndpoint,
      OTEL_TRACES_SAMPLER: 'parentbased_always_on',
      // Spans leave each process within a fifth of a second instead of five.
      OTEL_BSP_SCHEDULE_DELAY: '200',
    },
  });
}, GO_TOOLS_TIMEOUT_MS);

afterAll(async () => {
  await isolated?.close();
});

/** Polls until `find` returns something (spans reach Jaeger a moment after the request). */
async function eventually<T>(what: string, find: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await find();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`${what}: not found within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The trace's spans, once those that `complete` waits for have all arrived. */
function traceWhen(traceId: string, complete: (spans: TraceSpan[]) => boolean): Promise<TraceSpan[]> {
  return eventually(`trace ${traceId}`, async () => {
    const spans = await traceSpans(jaeger.queryUrl, traceId);
    return complete(spans) ? spans : undefined;
  });
}

/** The JSON log lines of a process that carry this trace id. */
function logLines(name: 'gateway' | 'campaign' | 'ingestion', traceId: string): Record<string, unknown>[] {
  return fs
    .readFileSync(isolated.stack.logFile(name), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line.trace_id === traceId);
}

const isGatewayServer = (span: TraceSpan): boolean => span.service === 'gateway' && span.kind === 'server';
const parentOf = (span: TraceSpan): string | undefined => span.references.find((ref) => ref.refType === 'CHILD_OF')?.spanId;

/** Whether `ancestor` is on the chain of parents of `span` within the trace. */
function descendsFrom(spans: TraceSpan[], span: TraceSpan, ancestor: TraceSpan): boolean {
  const byId = new Map(spans.map((each) => [each.spanId, each]));
  for (let parent = byId.get(parentOf(span) ?? ''); parent; parent = byId.get(parentOf(parent) ?? '')) {
    if (parent === ancestor) return true;
  }
  return false;
}

it('follows a campaign create from the gateway to the campaign service and its Postgres query', async () => {
  const workspace = await fetch(`${isolated.stack.urls.gateway}/workspaces/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', workspace_id: crypto.randomUUID() },
    body: JSON.stringify({ name: `tracing ${run}` }),
  });
  expect(workspace.status).toBe(201);
  const workspaceId = ((await workspace.json()) as { id: string }).id;
  const { traceparent, traceId } = newTraceparent();
  const response = await fetch(`${isolated.stack.urls.gateway}/email-campaigns/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', workspace_id: workspaceId, traceparent },
    body: JSON.stringify({ workspace_id: workspaceId, name: `traced ${run}` }),
  });
  expect(response.status).toBe(201);

  const isGrpcServer = (span: TraceSpan): boolean =>
    span.service === 'campaign' && span.kind === 'server' && span.operation.endsWith('/CreateCampaign');
  // Old and stable semantic conventions (OTEL_SEMCONV_STABILITY_OPT_IN picks).
  const isInsert = (span: TraceSpan): boolean =>
    span.service === 'campaign' &&
    (span.tags['db.system'] ?? span.tags['db.system.name']) === 'postgresql' &&
    /insert/i.test(String(span.tags['db.statement'] ?? span.tags['db.query.text']));
  const spans = await traceWhen(traceId, (all) => all.some(isGatewayServer) && all.some(isGrpcServer) && all.some(isInsert));

  const gateway = spans.find(isGatewayServer)!;
  expect(gateway.tags['http.route']).toBe('/email-campaigns/');
  const client = spans.find((span) => span.service === 'gateway' && span.kind === 'client' && span.operation.endsWith('/CreateCampaign'));
  expect(client).toBeDefined();
  expect(descendsFrom(spans, client!, gateway)).toBe(true);
  const server = spans.find(isGrpcServer)!;
  expect(parentOf(server)).toBe(client!.spanId);
  expect(descendsFrom(spans, spans.find(isInsert)!, server)).toBe(true);

  expect(logLines('gateway', traceId)).toEqual(
    expect.arrayContaining([expect.objectContaining({ msg: 'request answered', status: 201, span_id: expect.any(String) })]),
  );
  expect(logLines('campaign', traceId)).toEqual(
    expect.arrayContaining([expect.objectContaining({ msg: 'gRPC call answered', method: expect.stringMatching(/create/i) })]),
  );
});

it('links a webhook call, its Kafka produce and the ingestion span that stored its events in one trace', async () => {
  const { traceparent, traceId } = newTraceparent();
  const body = JSON.stringify([
    sendgridEvent({ event: 'open', sg_event_id: `trace-${run}-open`, category: `traced-${run}` }),
    sendgridEvent({ event: 'click', sg_event_id: `trace-${run}-click`, category: `traced-${run}`, url: 'https://example.com/' }),
  ]);
  const response = await post(isolated.stack.urls.gateway, body, {
    ...signedHeaders(keys.privateKey, body),
    authorization: `Basic ${Buffer.from(BASIC).toString('base64')}`,
    traceparent,
  });
  expect(response.status).toBe(202);

  const isPublish = (span: TraceSpan): boolean => span.service === 'gateway' && span.kind === 'producer';
  const spans = await traceWhen(traceId, (all) => all.some(isGatewayServer) && all.some(isPublish));
  const gateway = spans.find(isGatewayServer)!;
  const publish = spans.find(isPublish)!;
  expect(publish.operation).toBe(`publish ${isolated.env.KAFKA_EVENTS_TOPIC}`);
  expect(publish.tags['messaging.system']).toBe('kafka');
  expect(descendsFrom(spans, publish, gateway)).toBe(true);

  // The batch that stored the call's events: a child of its publish span when the batch holds this call's
  // events only, else a span of its own linked to it. Either way it names the publish span.
  const namesPublish = (span: TraceSpan): boolean => span.references.some((ref) => ref.spanId === publish.spanId);
  const stored = await eventually('the ingestion span of the webhook call', async () =>
    (await operationSpans(jaeger.queryUrl, 'ingestion', 'ingest events')).find(namesPublish),
  );
  // The topic is this file's own; no campaign carries the category traced-<run>, so both events go unmatched.
  expect(stored.tags['ingestion.events.consumed']).toBe(2);
  expect(stored.tags['ingestion.events.inserted']).toBe(0);
  // ClickHouse's HTTP calls of that batch are its children.
  const batchTrace = await traceWhen(stored.traceId, (all) =>
    all.some((span) => span.service === 'ingestion' && span.kind === 'client' && parentOf(span) === stored.spanId),
  );
  expect(batchTrace.length).toBeGreaterThan(1);

  expect(logLines('gateway', traceId)).toEqual(expect.arrayContaining([expect.objectContaining({ msg: 'request answered', status: 202 })]));
  expect(logLines('ingestion', stored.traceId)).toEqual(
    expect.arrayContaining([expect.objectContaining({ msg: 'batch stored', span_id: stored.spanId })]),
  );
});

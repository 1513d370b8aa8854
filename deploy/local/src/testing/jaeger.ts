import crypto from 'node:crypto';
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The trace backend that `infra.sh up jaeger` starts (the test command does):
 * where processes export to, and reads of its query API (the JSON API of
 * Jaeger's UI). Like the servers' addresses, there is no default.
 */
export interface JaegerEnv {
  /** OTLP/HTTP base URL, the value of OTEL_EXPORTER_OTLP_ENDPOINT. */
  otlpEndpoint: string;
  queryUrl: string;
}

export function jaegerEnv(env: Readonly<Record<string, string | undefined>> = process.env): JaegerEnv {
  const missing = ['JAEGER_OTLP_ENDPOINT', 'JAEGER_QUERY_URL'].filter((name) => !env[name]?.trim());
  if (missing.length > 0) {
    throw new Error(
      `${missing.join(', ')} not set: the trace backend is started and exported by \`npm test\` ` +
        '(by hand: eval "$(bash deploy/local/infra.sh up jaeger)")',
    );
  }
  return { otlpEndpoint: env.JAEGER_OTLP_ENDPOINT!, queryUrl: env.JAEGER_QUERY_URL! };
}

export interface TraceSpan {
  traceId: string;
  spanId: string;
  /** The process that recorded it (its OTEL_SERVICE_NAME). */
  service: string;
  operation: string;
  kind: string | undefined;
  /** Parent (CHILD_OF) and links (FOLLOWS_FROM), as Jaeger reports them. */
  references: { refType: string; traceId: string; spanId: string }[];
  tags: Record<string, unknown>;
}

interface JaegerTraceJson {
  traceID: string;
  spans: {
    traceID: string;
    spanID: string;
    operationName: string;
    processID: string;
    references?: { refType: string; traceID: string; spanID: string }[];
    tags?: { key: string; value: unknown }[];
  }[];
  processes: Record<string, { serviceName: string }>;
}

function spansOf(trace: JaegerTraceJson): TraceSpan[] {
  return trace.spans.map((span) => {
    const tags = Object.fromEntries((span.tags ?? []).map(({ key, value }) => [key, value]));
    return {
      traceId: span.traceID,
      spanId: span.spanID,
      service: trace.processes[span.processID]?.serviceName ?? '',
      operation: span.operationName,
      kind: typeof tags['span.kind'] === 'string' ? tags['span.kind'] : undefined,
      references: (span.references ?? []).map((ref) => ({ refType: ref.refType, traceId: ref.traceID, spanId: ref.spanID })),
      tags,
    };
  });
}

async function query(queryUrl: string, path: string): Promise<JaegerTraceJson[]> {
  const response = await fetch(`${queryUrl}${path}`);
  if (response.status === 404) return [];
  if (!response.ok) throw new Error(`GET ${queryUrl}${path}: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { data: JaegerTraceJson[] | null }).data ?? [];
}

/** The spans Jaeger holds for one trace (none if it holds no such trace yet). */
export async function traceSpans(queryUrl: string, traceId: string): Promise<TraceSpan[]> {
  return (await query(queryUrl, `/api/traces/${traceId}`)).flatMap(spansOf);
}

/** The spans of one operation of a service, over the last `lookbackMinutes`, newest traces first. */
export async function operationSpans(queryUrl: string, service: string, operation: string, lookbackMinutes = 15): Promise<TraceSpan[]> {
  const end = Date.now() * 1000;
  const params = new URLSearchParams({
    service,
    operation,
    start: String(end - lookbackMinutes * 60_000_000),
    end: String(end),
    limit: '100',
  });
  return (await query(queryUrl, `/api/traces?${params.toString()}`)).flatMap(spansOf).filter((span) => span.operation === operation);
}

/** A W3C traceparent for a new sampled trace, so a test knows the trace id of the request it sends. */
export function newTraceparent(): { traceparent: string; traceId: string } {
  const traceId = crypto.randomBytes(16).toString('hex');
  return { traceparent: `00-${traceId}-${crypto.randomBytes(8).toString('hex')}-01`, traceId };
}

/**
 * Waits for the build of Jaeger and promtool that `npm test` runs in the
 * background on a machine's first run (deploy/local/test.sh: GO_TOOLS_STATUS
 * holds its exit status once done); throws with its log if it failed.
 * Returns at once when nothing builds them in the background.
 */
export async function awaitGoTools(): Promise<void> {
  const statusFile = process.env.GO_TOOLS_STATUS?.trim();
  if (!statusFile) return;
  while (!fs.existsSync(statusFile) || fs.readFileSync(statusFile, 'utf8').trim() === '') await sleep(1000);
  const status = fs.readFileSync(statusFile, 'utf8').trim();
  if (status !== '0') {
    const log = process.env.GO_TOOLS_LOG ? fs.readFileSync(process.env.GO_TOOLS_LOG, 'utf8').split('\n').slice(-20).join('\n') : '';
    throw new Error(`infra.sh up jaeger promtool failed (exit ${status}):\n${log}`);
  }
}

/** How long a test waits for awaitGoTools: a first build on 2 busy cores. */
export const GO_TOOLS_TIMEOUT_MS = 30 * 60_000;

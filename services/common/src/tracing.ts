/**
 * Starts OpenTelemetry tracing for the process, or does nothing. Loaded as
 * `@mail/common/tracing` by the first import of every process's main.ts: the
 * instrumentations patch grpc-js, pg, kafkajs, http and express as they are
 * required, so this must run before any of them is (an import further down,
 * or of @mail/common's index first, would leave them unpatched).
 *
 * It starts only when a trace exporter is configured through the standard
 * variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
 * or OTEL_TRACES_EXPORTER); the rest (OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER,
 * OTEL_TRACES_SAMPLER_ARG, OTEL_EXPORTER_OTLP_PROTOCOL, default
 * http/protobuf, ...) is read by the SDK itself. Without them nothing is
 * loaded, patched or exported. Only traces are exported: metrics stay on
 * each process's Prometheus /metrics.
 */
import type { IncomingMessage } from 'node:http';

/** Polled by probes and scrapers many times a minute; no trace would say anything. */
const UNTRACED_PATHS = new Set(['/metrics', '/healthz', '/readyz']);
/** grpc.health.v1's methods, called as often. */
const UNTRACED_GRPC_METHODS = ['Check', 'Watch'];

export function tracingConfigured(env: NodeJS.ProcessEnv): boolean {
  const set = (name: string): boolean => (env[name] ?? '').trim() !== '';
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false;
  const exporter = env.OTEL_TRACES_EXPORTER?.trim();
  if (exporter === 'none') return false;
  return set('OTEL_EXPORTER_OTLP_ENDPOINT') || set('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') || Boolean(exporter);
}

function startTracing(): void {
  /* eslint-disable @typescript-eslint/no-require-imports -- loaded only when tracing is on */
  const { NodeSDK } = require('@opentelemetry/sdk-node') as typeof import('@opentelemetry/sdk-node');
  const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http') as typeof import('@opentelemetry/instrumentation-http');
  const { ExpressInstrumentation, ExpressLayerType } =
    require('@opentelemetry/instrumentation-express') as typeof import('@opentelemetry/instrumentation-express');
  const { GrpcInstrumentation } = require('@opentelemetry/instrumentation-grpc') as typeof import('@opentelemetry/instrumentation-grpc');
  const { PgInstrumentation } = require('@opentelemetry/instrumentation-pg') as typeof import('@opentelemetry/instrumentation-pg');
  const { KafkaJsInstrumentation } =
    require('@opentelemetry/instrumentation-kafkajs') as typeof import('@opentelemetry/instrumentation-kafkajs');
  /* eslint-enable @typescript-eslint/no-require-imports */

  const sdk = new NodeSDK({
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (request: IncomingMessage) => UNTRACED_PATHS.has((request.url ?? '').split('?')[0]),
        // Background loops (maintenance, readiness) would each start a trace of their own.
        requireParentforOutgoingSpans: true,
      }),
      new ExpressInstrumentation({ ignoreLayersType: [ExpressLayerType.MIDDLEWARE] }),
      new GrpcInstrumentation({ ignoreGrpcMethods: UNTRACED_GRPC_METHODS }),
      new PgInstrumentation({ requireParentSpan: true }),
      new KafkaJsInstrumentation(),
    ],
  });
  sdk.start();
}

if (tracingConfigured(process.env)) startTracing();

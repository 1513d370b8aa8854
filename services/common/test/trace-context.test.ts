import { context, trace, type Context } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { activeSpanIds, endSpan, inLinkedSpan, recordSpanContexts, startPublishSpan, traceHeaders, untraced } from '@mail/common';
import { tracingConfigured } from '@mail/common/tracing';

/**
 * The trace context of event records, with an in-process SDK (the end-to-end
 * path through Kafka and a real trace backend is gateway/test/tracing.test.ts).
 */
const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();
const tracer = trace.getTracer('trace-context-test');

afterAll(() => provider.shutdown());
beforeEach(() => exporter.reset());

/** A context whose active span is a new root span (a webhook call's). */
function callContext(): Context {
  return trace.setSpan(context.active(), tracer.startSpan('POST /webhook'));
}

it('names every call of a record in repeated traceparent headers, and reads them back', () => {
  const first = startPublishSpan(callContext(), 'events', 2);
  const second = startPublishSpan(callContext(), 'events', 1);
  const headers = traceHeaders([first, second, first]);
  expect(headers.traceparent).toHaveLength(2);
  // As kafkajs hands them to a consumer: Buffers, a single value unwrapped.
  const read = recordSpanContexts({ traceparent: (headers.traceparent as string[]).map((value) => Buffer.from(value)) });
  expect(read.map((span) => span.spanId)).toEqual([first.spanContext().spanId, second.spanContext().spanId]);
  expect(recordSpanContexts({ traceparent: Buffer.from((headers.traceparent as string[])[0]) })).toHaveLength(1);
  expect(recordSpanContexts({ 'record-schema': 'x' })).toEqual([]);
  expect(recordSpanContexts(undefined)).toEqual([]);
  endSpan(first);
  endSpan(second, new Error('kafka is down'));
  const [okSpan, failed] = exporter.getFinishedSpans();
  expect(okSpan.status.code).toBe(0);
  expect(failed.status).toEqual({ code: 2, message: 'kafka is down' });
});

it("stores one call's batch as a child of its publish span, and a batch of many calls as a span linked to each", async () => {
  const one = startPublishSpan(callContext(), 'events', 1).spanContext();
  const other = startPublishSpan(callContext(), 'events', 1).spanContext();

  const single = await inLinkedSpan('ingest events', [one, one], (span) => Promise.resolve(span.spanContext()));
  const shared = await inLinkedSpan('ingest events', [one, other], (span) => Promise.resolve(span.spanContext()));
  const [singleSpan, sharedSpan] = exporter.getFinishedSpans().filter((span) => span.name === 'ingest events');

  expect(single.traceId).toBe(one.traceId);
  expect(singleSpan.parentSpanContext?.spanId).toBe(one.spanId);
  expect(singleSpan.links).toEqual([]);
  expect(shared.traceId).not.toBe(one.traceId);
  expect(sharedSpan.links.map((link) => link.context.spanId)).toEqual([one.spanId, other.spanId]);
});

it('marks a failed batch span as an error and rethrows', async () => {
  await expect(inLinkedSpan('ingest events', [], () => Promise.reject(new Error('clickhouse is down')))).rejects.toThrow(
    'clickhouse is down',
  );
  expect(exporter.getFinishedSpans()[0].status).toEqual({ code: 2, message: 'clickhouse is down' });
});

it('gives log lines the ids of the active span, and none outside one', () => {
  expect(activeSpanIds()).toEqual({});
  const span = tracer.startSpan('work');
  context.with(trace.setSpan(context.active(), span), () => {
    expect(activeSpanIds()).toEqual({ trace_id: span.spanContext().traceId, span_id: span.spanContext().spanId });
  });
  span.end();
});

it('records nothing and injects nothing inside untraced', () => {
  untraced(() => {
    const span = tracer.startSpan('send');
    expect(span.isRecording()).toBe(false);
    expect(traceHeaders([span])).toEqual({});
    span.end();
  });
  expect(exporter.getFinishedSpans()).toEqual([]);
});

it('starts the SDK only when an exporter is configured', () => {
  expect(tracingConfigured({})).toBe(false);
  expect(tracingConfigured({ OTEL_SERVICE_NAME: 'campaign', OTEL_TRACES_SAMPLER: 'always_on' })).toBe(false);
  expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
  expect(tracingConfigured({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' })).toBe(true);
  expect(tracingConfigured({ OTEL_TRACES_EXPORTER: 'console' })).toBe(true);
  expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
  expect(tracingConfigured({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
});

import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  trace,
  type Context,
  type Link,
  type Span,
  type SpanContext,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator, suppressTracing } from '@opentelemetry/core';
import type { IHeaders } from 'kafkajs';

export type { Span, SpanContext } from '@opentelemetry/api';

/**
 * Trace context across the hops the instrumentations cannot follow on their
 * own, through the OpenTelemetry API only: while tracing is off (see
 * ./tracing) every function here is a cheap no-op.
 *
 * An event record on Kafka carries the events of several webhook calls (the
 * publisher joins concurrent calls into one record per partition), so it
 * carries one W3C `traceparent` header per call: the header repeated, in the
 * order of the calls. The span that stores a batch links to each of them.
 */

const TRACER_NAME = '@mail/common';
const TRACEPARENT = 'traceparent';
const w3c = new W3CTraceContextPropagator();

/** The context the caller runs in (the webhook call's span, when traced). */
export const currentTraceContext = (): Context => context.active();

/** Runs `fn` with no span recorded and no context injected (the kafkajs instrumentation would overwrite the headers). */
export function untraced<T>(fn: () => T): T {
  return context.with(suppressTracing(context.active()), fn);
}

/** trace_id and span_id of the active span, for log lines; none outside a span. */
export function activeSpanIds(): { trace_id: string; span_id: string } | Record<string, never> {
  const span = trace.getActiveSpan()?.spanContext();
  return span && isSpanContextValid(span) ? { trace_id: span.traceId, span_id: span.spanId } : {};
}

/** A PRODUCER span, child of `parent`, for one call's events sent to `topic`; end it with endSpan. */
export function startPublishSpan(parent: Context, topic: string, events: number): Span {
  return trace.getTracer(TRACER_NAME).startSpan(
    `publish ${topic}`,
    {
      kind: SpanKind.PRODUCER,
      attributes: {
        'messaging.system': 'kafka',
        'messaging.operation.type': 'send',
        'messaging.destination.name': topic,
        'messaging.batch.message_count': events,
      },
    },
    parent,
  );
}

export function endSpan(span: Span, error?: Error): void {
  if (error) {
    span.recordException(error);
    span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
  }
  span.end();
}

/** The record headers naming the spans whose events a record carries (none while tracing is off). */
export function traceHeaders(spans: readonly Span[]): IHeaders {
  const values: string[] = [];
  for (const span of spans) {
    const carrier: Record<string, string> = {};
    w3c.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
    if (carrier[TRACEPARENT] && !values.includes(carrier[TRACEPARENT])) values.push(carrier[TRACEPARENT]);
  }
  return values.length > 0 ? { [TRACEPARENT]: values } : {};
}

/** The span contexts a record's headers name (see traceHeaders). */
export function recordSpanContexts(headers: IHeaders | undefined): SpanContext[] {
  const header = headers?.[TRACEPARENT];
  const values = header === undefined ? [] : Array.isArray(header) ? header : [header];
  const contexts: SpanContext[] = [];
  for (const value of values) {
    const extracted = w3c.extract(ROOT_CONTEXT, { [TRACEPARENT]: value.toString() }, defaultTextMapGetter);
    const spanContext = trace.getSpanContext(extracted);
    if (spanContext && isSpanContextValid(spanContext)) contexts.push(spanContext);
  }
  return contexts;
}

/**
 * Runs `fn` in a span for work on records of many calls. The records' spans
 * (`sources`) are its links; when they are all one span, the work is that
 * call's own and the span its child, so the call and the work form one trace.
 */
export async function inLinkedSpan<T>(name: string, sources: readonly SpanContext[], fn: (span: Span) => Promise<T>): Promise<T> {
  const distinct = [...new Map(sources.map((source) => [`${source.traceId}-${source.spanId}`, source])).values()];
  const parent = distinct.length === 1 ? trace.setSpanContext(context.active(), distinct[0]) : context.active();
  const links: Link[] = distinct.length > 1 ? distinct.map((source) => ({ context: source })) : [];
  return trace.getTracer(TRACER_NAME).startActiveSpan(name, { kind: SpanKind.CONSUMER, links }, parent, async (span) => {
    let failure: Error | undefined;
    try {
      return await fn(span);
    } catch (error) {
      failure = error instanceof Error ? error : new Error(String(error));
      throw error;
    } finally {
      endSpan(span, failure);
    }
  });
}

/** Exports the spans still buffered; before the process exits. */
export async function flushSpans(): Promise<void> {
  const provider = trace.getTracerProvider() as { getDelegate?: () => unknown };
  const delegate = provider.getDelegate?.() as { forceFlush?: () => Promise<void> } | undefined;
  await delegate?.forceFlush?.();
}

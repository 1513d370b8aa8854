/**
 * What tracing costs the pipeline: the pipeline benchmark (pipeline-bench.ts)
 * on two fresh stacks, one after the other:
 *   off      no OTEL_* variable set, the default: the SDK is not loaded;
 *   sampled  every process exporting to the local Jaeger (`infra.sh up jaeger`,
 *            JAEGER_OTLP_ENDPOINT) with OTEL_TRACES_SAMPLER=parentbased_traceidratio
 *            and OTEL_TRACES_SAMPLER_ARG=0.1: one webhook call in ten is traced
 *            whole, every other span is created unsampled.
 * Settings: BENCH_TRACING_EVENTS (default 100000) events per stack,
 * BENCH_CONCURRENCY and BENCH_LATENCY_SECONDS as for the pipeline benchmark.
 */
import { jaegerEnv } from '@mail/local';
import { startBenchStack } from './bench-stack';
import { log } from './measure';
import { pipelineSettings, runPipelineBench, type PipelineResult, type PipelineSettings } from './pipeline-bench';

export const TRACING_MODES = {
  off: {},
  sampled: {
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.1',
  },
} as const;

export type TracingMode = keyof typeof TRACING_MODES;
export type TracingResult = Record<TracingMode, PipelineResult>;

export function tracingSettings(env: NodeJS.ProcessEnv = process.env): PipelineSettings {
  return { ...pipelineSettings(env), events: Number(env.BENCH_TRACING_EVENTS ?? 100_000) };
}

export async function runTracingBench(settings: PipelineSettings = tracingSettings()): Promise<TracingResult> {
  const exportTo = { OTEL_EXPORTER_OTLP_ENDPOINT: jaegerEnv().otlpEndpoint };
  const results: Partial<TracingResult> = {};
  for (const mode of Object.keys(TRACING_MODES) as TracingMode[]) {
    log('tracing', `pipeline with tracing ${mode}`);
    const bench = await startBenchStack(mode === 'off' ? {} : { ...exportTo, ...TRACING_MODES[mode] });
    try {
      results[mode] = await runPipelineBench(bench, settings);
    } finally {
      await bench.close();
    }
  }
  return results as TracingResult;
}

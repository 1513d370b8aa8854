/**
 * The 422 of a body that fails in very many places, through the suite's
 * gateway (bench-stack.ts): POST /email-campaigns/ with 450,000 wrong items in
 * `csv_account_ids` (just under the 1 MB body limit) and one wrong scalar. The
 * answer lists the first 1,000 failures; this measures how long building it
 * takes, one call at a time (the figure gateway/test/validation.test.ts used
 * to assert). Settings: BENCH_VALIDATION_CALLS (default 20).
 */
import crypto from 'node:crypto';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import type { BenchStack } from './bench-stack';
import { log, summarize } from './measure';

export interface ValidationSettings {
  calls: number;
}

export function validationSettings(env: NodeJS.ProcessEnv = process.env): ValidationSettings {
  return { calls: Number(env.BENCH_VALIDATION_CALLS ?? 20) };
}

export interface ValidationResult {
  settings: ValidationSettings;
  bodyBytes: number;
  answerBytes: number;
  entries: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

function post(url: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', headers: { ...headers, 'content-length': String(body.length) } }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      response.on('error', reject);
    });
    request.on('error', reject);
    request.end(body);
  });
}

export async function runValidationBench(bench: BenchStack, settings: ValidationSettings): Promise<ValidationResult> {
  const workspaceId = crypto.randomUUID();
  const body = Buffer.from(
    JSON.stringify({ workspace_id: workspaceId, name: 'many failures', csv_account_ids: Array(450_000).fill(1), send_priority: 'x' }),
  );
  const headers = { 'content-type': 'application/json', workspace_id: workspaceId };
  const url = `${bench.stack.urls.gateway}/email-campaigns/`;
  const latencies: number[] = [];
  let answer = { status: 0, text: '' };
  log('validation', `${settings.calls} calls of ${body.length} bytes, one at a time`);
  for (let i = 0; i < settings.calls; i++) {
    const started = performance.now();
    answer = await post(url, headers, body);
    latencies.push(performance.now() - started);
    if (answer.status !== 422) throw new Error(`expected 422, got ${answer.status}: ${answer.text.slice(0, 200)}`);
  }
  const entries = (JSON.parse(answer.text) as { detail: unknown[] }).detail.length;
  return {
    settings,
    bodyBytes: body.length,
    answerBytes: Buffer.byteLength(answer.text),
    entries,
    ...summarize(latencies.sort((a, b) => a - b)),
  };
}

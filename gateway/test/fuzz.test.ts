import { spawn, type SpawnOptions } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { startHostileStack, type HostileStack } from './fuzz/stack';

/**
 * API fuzzing with Schemathesis (PyPI, pinned in fuzz/requirements.txt, installed into .state/venv by
 * deploy/local/python-venv.sh) against the real stack's /openapi.json: every operation, the webhook
 * included (unauthenticated, private Kafka topic), with a fixed seed and a bounded number of examples.
 * Checks: no 5xx (a 503 "retry later" only if sending the request again after its Retry-After, as a client
 * would, still gets one: hooks.py), every response's status documented, every response body valid against
 * its schema. A second run against a deliberately broken server proves the same command does fail.
 */
jest.setTimeout(1_800_000);

const REPO_ROOT = path.resolve(__dirname, '../..');
const FUZZ_DIR = path.join(__dirname, 'fuzz');
const SEED = 20261121;
const MAX_EXAMPLES = 50;
const CHECKS = 'no_server_error_after_retries,status_code_conformance,response_schema_conformance';
// Only a guard against a hang: a busy host runs it at a fraction of a quiet one's speed (two suites side by side
// took over 600 s), and each example of PUT /workspaces/{id}/recipient-database may wait for its URL's connection attempt.
const SCHEMATHESIS_TIME_LIMIT_MS = 1_500_000;

interface Finished {
  code: number | null;
  output: string;
}

/** Runs a command to completion (killed after timeoutMs), stdout and stderr interleaved. */
function run(command: string, args: string[], options: SpawnOptions & { timeoutMs: number }): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => {
      output += `\n[killed after ${options.timeoutMs / 1000} s]`;
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

let schemathesis: string;
let workDir: string;

async function runSchemathesis(schemaUrl: string, extraArgs: string[], env: Record<string, string> = {}): Promise<Finished> {
  return run(
    schemathesis,
    [
      'run',
      schemaUrl,
      `--checks=${CHECKS}`,
      `--seed=${SEED}`,
      `--max-examples=${MAX_EXAMPLES}`,
      // Replaying failures stored by an earlier run would make the result depend on history.
      '--generation-database=none',
      // The machine is shared with the rest of the suite: slowness is not a finding here.
      '--suppress-health-check=too_slow',
      '--request-timeout=30',
      '--no-color',
      ...extraArgs,
    ],
    {
      cwd: workDir,
      env: { ...process.env, PYTHONPATH: FUZZ_DIR, PYTHONDONTWRITEBYTECODE: '1', SCHEMATHESIS_HOOKS: 'hooks', ...env },
      timeoutMs: SCHEMATHESIS_TIME_LIMIT_MS,
    },
  );
}

/** What to show when a run failed: its FAILURES section through the summary, or the tail of the output. */
function failureSummary(output: string): string {
  const start = output.indexOf('=== FAILURES ===');
  const text = start >= 0 ? output.slice(output.lastIndexOf('\n', start) + 1) : output.split('\n').slice(-80).join('\n');
  return text.length > 20_000 ? `${text.slice(0, 10_000)}\n[...]\n${text.slice(-10_000)}` : text;
}

/** The last errors the stack's processes logged (pino level 50 and above), for a failure's message: its end is what a truncated CI log keeps. */
function loggedErrors(logDir: string): string {
  const lines = fs
    .readdirSync(logDir)
    .filter((name) => name.endsWith('.log'))
    .flatMap((name) =>
      fs
        .readFileSync(path.join(logDir, name), 'utf8')
        .split('\n')
        .filter((line) => /^\{"level":(5|6)\d,/.test(line))
        .map((line) => `${name}: ${line.slice(0, 600)}`),
    );
  return lines.length === 0 ? 'no errors logged' : lines.slice(-20).join('\n');
}

beforeAll(async () => {
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'schemathesis-'));
  const venv = await run('bash', [path.join(REPO_ROOT, 'deploy/local/python-venv.sh')], { cwd: REPO_ROOT, timeoutMs: 300_000 });
  if (venv.code !== 0) throw new Error(`deploy/local/python-venv.sh failed (${venv.code}):\n${venv.output}`);
  schemathesis = path.join(venv.output.trim().split('\n').pop()!, 'schemathesis');
});

afterAll(() => {
  if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
});

describe('the gateway under Schemathesis', () => {
  let target: HostileStack;

  beforeAll(async () => {
    target = await startHostileStack('fuzz');
  });

  afterAll(async () => {
    await target?.close();
  });

  it('answers every documented operation without a 5xx, with documented statuses and schema-valid bodies', async () => {
    const document = (await (await fetch(`${target.gateway}/openapi.json`)).json()) as { paths: Record<string, object> };
    const methods = ['get', 'head', 'put', 'post', 'delete', 'patch'];
    const operations = Object.values(document.paths).flatMap((item) => Object.keys(item).filter((key) => methods.includes(key))).length;

    const started = Date.now();
    const result = await runSchemathesis(
      `${target.gateway}/openapi.json`,
      [
        `--header=workspace_id: ${target.workspaceId}`,
        '--report=junit',
        `--report-junit-path=${path.join(REPO_ROOT, 'test-output', 'schemathesis-junit.xml')}`,
      ],
      { FUZZ_WORKSPACE_ID: target.workspaceId },
    );
    const seconds = Math.round((Date.now() - started) / 1000);
    const verdict =
      result.code === 0
        ? 'passed'
        : `Schemathesis exited ${result.code} after ${seconds} s:\n${failureSummary(result.output)}\n` +
          `The stack's last logged errors:\n${loggedErrors(target.stack.logDir)}`;
    expect(verdict).toBe('passed');
    expect(result.output).toContain(`Selected: ${operations}/${operations}`);
    expect(result.output).toMatch(new RegExp(`Tested: ${operations}\\b`));
  });
});

describe('the same Schemathesis command against a deliberately broken server', () => {
  let server: http.Server;
  let base: string;

  /**
   * One operation answers 500, one a body that violates its schema, one 503 with Retry-After to every call, and
   * one 503 with Retry-After to every other call (so each of its retries succeeds).
   */
  const document = {
    openapi: '3.0.3',
    info: { title: 'broken', version: '1' },
    paths: {
      '/items': {
        get: {
          responses: {
            '200': {
              description: 'items',
              content: { 'application/json': { schema: { type: 'array', items: { $ref: '#/components/schemas/Item' } } } },
            },
          },
        },
      },
      '/busy': { get: { responses: { '200': { description: 'never' }, '503': { description: 'busy' } } } },
      '/flaky': { get: { responses: { '200': { description: 'every other call' }, '503': { description: 'busy' } } } },
      '/items/{id}': {
        get: {
          parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'integer' } }],
          responses: {
            '200': { description: 'one item', content: { 'application/json': { schema: { $ref: '#/components/schemas/Item' } } } },
          },
        },
      },
    },
    components: {
      schemas: {
        Item: { type: 'object', required: ['id', 'name'], properties: { id: { type: 'integer' }, name: { type: 'string' } } },
      },
    },
  };

  let flakyCalls = 0;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const send = (status: number, body: unknown) =>
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname === '/openapi.json') return send(200, document);
      if (url.pathname === '/items') return send(500, { detail: 'Internal Server Error' });
      if (url.pathname === '/busy' || (url.pathname === '/flaky' && ++flakyCalls % 2 === 1)) {
        return res.writeHead(503, { 'retry-after': '1' }).end();
      }
      if (url.pathname === '/flaky') return res.writeHead(200).end();
      if (url.pathname.startsWith('/items/')) return send(200, { id: 'not-an-integer' });
      send(404, { detail: 'Not Found' });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('exits non-zero and names the three failures, not the 503s that a retry cleared', async () => {
    const result = await runSchemathesis(`${base}/openapi.json`, []);
    expect(result.code).toBe(1);
    expect(result.output).toContain('Server error: 500');
    expect(result.output).toContain('Server error: 503 after 3 retries as its Retry-After said');
    expect(result.output).toContain('Response violates schema');
    expect(result.output).toMatch(/GET \/items\b/);
    expect(result.output).toMatch(/GET \/items\/\{id\}/);
    // A failure's heading: "___ <METHOD> <path> ___".
    expect(result.output).toMatch(/_ [A-Z]+ \/busy _/);
    expect(result.output).not.toMatch(/_ [A-Z]+ \/flaky _/);
    expect(flakyCalls).toBeGreaterThan(1);
  });
});

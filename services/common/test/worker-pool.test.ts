import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { WorkerPool } from '../src/worker-pool';

/** WorkerPool.prestart: the workers load before the first call, and the calls run on them. */

let dir: string;
let script: string;
let started: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'worker-pool-'));
  script = path.join(dir, 'worker.js');
  started = path.join(dir, 'started');
  // Notes its thread id when it loads, and answers each call with it.
  fs.writeFileSync(
    script,
    `const { threadId } = require('node:worker_threads');
     require('node:fs').appendFileSync(${JSON.stringify(started)}, threadId + '\\n');
     require(${JSON.stringify(require.resolve('@mail/common/worker-pool'))}).serveWorker(() => threadId);`,
  );
});

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const startedThreads = (): number[] =>
  fs.existsSync(started) ? fs.readFileSync(started, 'utf8').trim().split('\n').filter(Boolean).map(Number) : [];

test('prestart loads every worker before any call, and the calls run on them', async () => {
  const pool = new WorkerPool({ script, size: 2, stepTimeoutMs: 10_000 });
  try {
    pool.prestart();
    while (startedThreads().length < 2) await new Promise((resolve) => setTimeout(resolve, 20));

    const answered = await Promise.all([pool.run<number>(null), pool.run<number>(null), pool.run<number>(null)]);

    const threads = startedThreads();
    expect(threads).toHaveLength(2);
    for (const thread of answered) expect(threads).toContain(thread);
  } finally {
    await pool.close();
  }
});

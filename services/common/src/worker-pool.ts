import { Worker, parentPort, type ResourceLimits } from 'node:worker_threads';

/**
 * Work that may take unbounded time or memory (a template a user wrote) runs in worker threads, never on
 * the thread that serves calls. Each call may take `stepTimeoutMs`, counted again from each report the
 * worker sends on the way; past it the worker is terminated and replaced, and the call fails with
 * WorkerTimeoutError. Imported alone (`@mail/common/worker-pool`) by worker scripts, to load nothing else.
 */

export class WorkerTimeoutError extends Error {}

/** The worker died during the call: out of memory (resourceLimits) or crashed. */
export class WorkerFailedError extends Error {}

/** The worker went past its resourceLimits during the call. */
export class WorkerOutOfMemoryError extends WorkerFailedError {}

export interface WorkerPoolOptions {
  /** The compiled worker script; it calls serveWorker. */
  script: string;
  /** Workers at most; calls beyond them wait for one. */
  size: number;
  stepTimeoutMs: number;
  resourceLimits?: ResourceLimits;
}

type Answer = { ready: true } | { report: unknown } | { result: unknown } | { error: string };

interface Call {
  input: unknown;
  onReport?: (report: unknown) => void;
  resolve(result: unknown): void;
  reject(error: Error): void;
}

export class WorkerPool {
  private readonly live = new Set<Worker>();
  /** Resolves once a worker has loaded its script: the clock of a call starts then, not while modules load. */
  private readonly ready = new WeakMap<Worker, Promise<void>>();
  private readonly idle: Worker[] = [];
  private readonly waiting: Call[] = [];
  private closed = false;

  constructor(private readonly options: WorkerPoolOptions) {}

  /** Starts every worker now, so that the first calls do not wait for workers to load their scripts. */
  prestart(): void {
    while (this.live.size < this.options.size && !this.closed) this.idle.push(this.spawn());
  }

  /** Runs `input` in a worker; `onReport` sees each report it sends before the result. */
  run<T>(input: unknown, onReport?: (report: unknown) => void): Promise<T> {
    if (this.closed) return Promise.reject(new Error('the worker pool is closed'));
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ input, onReport, resolve, reject });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const call of this.waiting.splice(0)) call.reject(new Error('the worker pool is closed'));
    await Promise.all([...this.live].map((worker) => worker.terminate()));
  }

  private dispatch(): void {
    while (this.waiting.length > 0 && !this.closed) {
      const worker = this.idle.pop() ?? (this.live.size < this.options.size ? this.spawn() : undefined);
      if (!worker) return;
      this.runOn(worker, this.waiting.shift()!);
    }
  }

  private spawn(): Worker {
    const worker = new Worker(this.options.script, { resourceLimits: this.options.resourceLimits });
    // An idle worker must not keep the process from exiting.
    worker.unref();
    this.ready.set(
      worker,
      new Promise((resolve) => {
        const onReady = (answer: Answer): void => {
          if (!('ready' in answer)) return;
          worker.off('message', onReady);
          resolve();
        };
        worker.on('message', onReady);
      }),
    );
    // A call's own listener reports an error; one while idle only ends the worker, which 'exit' handles.
    worker.on('error', () => undefined);
    worker.once('exit', () => {
      this.forget(worker);
      this.dispatch();
    });
    this.live.add(worker);
    return worker;
  }

  private forget(worker: Worker): void {
    this.live.delete(worker);
    const at = this.idle.indexOf(worker);
    if (at >= 0) this.idle.splice(at, 1);
  }

  private runOn(worker: Worker, call: Call): void {
    let timer: NodeJS.Timeout | undefined;
    let finished = false;
    const finish = (outcome: { result: unknown } | { error: Error; replace: boolean }): void => {
      finished = true;
      clearTimeout(timer);
      worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      worker.unref();
      if ('result' in outcome) {
        this.idle.push(worker);
        call.resolve(outcome.result);
      } else {
        if (outcome.replace) {
          this.forget(worker);
          void worker.terminate();
        } else {
          this.idle.push(worker);
        }
        call.reject(outcome.error);
      }
      this.dispatch();
    };
    const arm = (): void => {
      clearTimeout(timer);
      timer = setTimeout(
        () => finish({ error: new WorkerTimeoutError('the worker took too long'), replace: true }),
        this.options.stepTimeoutMs,
      );
    };
    const onMessage = (answer: Answer): void => {
      if ('ready' in answer) return;
      if ('report' in answer) {
        arm();
        call.onReport?.(answer.report);
      } else if ('result' in answer) {
        finish({ result: answer.result });
      } else {
        finish({ error: new Error(answer.error), replace: false });
      }
    };
    const onError = (error: Error & { code?: string }): void => {
      const failure =
        error.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? new WorkerOutOfMemoryError('the worker ran out of memory')
          : new WorkerFailedError(`the worker failed: ${error.message}`);
      finish({ error: failure, replace: true });
    };
    const onExit = (code: number): void => finish({ error: new WorkerFailedError(`the worker exited (code ${code})`), replace: true });
    worker.on('message', onMessage).on('error', onError).on('exit', onExit);
    worker.ref();
    void this.ready.get(worker)?.then(() => {
      if (finished) return;
      arm();
      worker.postMessage(call.input);
    });
  }
}

/** In a worker script: answers each input with `handle`'s result; `report` sends a report, which restarts the step's clock. */
export function serveWorker<Input, Output>(handle: (input: Input, report: (value: unknown) => void) => Output): void {
  const port = parentPort;
  if (!port) throw new Error('serveWorker() runs in a worker thread');
  port.on('message', (input: Input) => {
    try {
      port.postMessage({ result: handle(input, (report) => port.postMessage({ report })) });
    } catch (error) {
      port.postMessage({ error: error instanceof Error ? error.message : String(error) });
    }
  });
  port.postMessage({ ready: true });
}

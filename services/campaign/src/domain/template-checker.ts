import path from 'node:path';
import { WorkerFailedError, WorkerOutOfMemoryError, WorkerPool, WorkerTimeoutError } from '@mail/common';
import { textsToCheck, type TemplateProblems, type TemplateWrite } from './template';

/** How long the compile check of one text may take before its worker is terminated and replaced. */
export const TEMPLATE_CHECK_TIMEOUT_MS = 3_000;
/** The heap the compile check of one text may use. */
const TEMPLATE_CHECK_HEAP_MB = 256;

/**
 * Runs the compile check of template texts (templateProblem of @mail/common) in worker threads, with a
 * time and a memory limit: a template, however written, never holds the thread that serves calls.
 */
export class TemplateChecker {
  private readonly pool: WorkerPool;

  /** `script`: the compiled worker; tests that load this module from its source name the built one. */
  constructor(script = path.join(__dirname, 'template-check-worker.js')) {
    this.pool = new WorkerPool({
      script,
      size: 2,
      stepTimeoutMs: TEMPLATE_CHECK_TIMEOUT_MS,
      resourceLimits: { maxOldGenerationSizeMb: TEMPLATE_CHECK_HEAP_MB, maxYoungGenerationSizeMb: 32 },
    });
  }

  /** The problem of each template text of the write that is within its length, by field. */
  async check(write: TemplateWrite): Promise<TemplateProblems> {
    const found = await Promise.all(textsToCheck(write).map(async ([field, source]) => [field, await this.problem(source)] as const));
    return Object.fromEntries(found.filter(([, problem]) => problem !== undefined));
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async problem(source: string): Promise<string | undefined> {
    try {
      return (await this.pool.run<string | null>(source)) ?? undefined;
    } catch (error) {
      // Which limit a huge template reaches first depends on the host: one answer for both.
      if (error instanceof WorkerTimeoutError || error instanceof WorkerOutOfMemoryError) {
        return `template is too complex to check (over ${TEMPLATE_CHECK_TIMEOUT_MS / 1000} s or ${TEMPLATE_CHECK_HEAP_MB} MB): simplify it`;
      }
      if (error instanceof WorkerFailedError) return `template could not be checked: ${error.message}`;
      throw error;
    }
  }
}

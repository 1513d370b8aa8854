import { templateProblem } from '@mail/common/handlebars';
import { serveWorker } from '@mail/common/worker-pool';

/** The compile check of one template text, in a worker thread (template-checker.ts): its problem, or null. */
serveWorker((source: string) => templateProblem(source) ?? null);

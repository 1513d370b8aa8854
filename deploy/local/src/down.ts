import fs from 'node:fs';
import path from 'node:path';
import { stopDetached } from './stack';

/**
 * `npm run down`, first half: stops the services and the gateway that
 * `npm run up` started, found by their PID files; a PID that now belongs to
 * some other process is left alone. deploy/local/down.sh then stops the servers.
 */

const repoRoot = path.resolve(__dirname, '../../..');
const stateDir = path.resolve(process.env.STATE_DIR?.trim() || path.join(repoRoot, '.state'));

async function main(): Promise<void> {
  const stopped = await stopDetached(stateDir, { log: (line) => console.error(`[down] ${line}`) });
  fs.rmSync(path.join(stateDir, 'stack.json'), { force: true });
  console.error(stopped.length > 0 ? `[down] stopped ${stopped.length} processes` : '[down] no stack processes were running');
}

main().catch((error: unknown) => {
  console.error(`[down] ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});

/**
 * The sending calibration's second client (sending-bench.ts), in a process of
 * its own so that its CPU is the client's alone: the messages it is sent
 * (IPC), each composed by the sender's own MIME composer and handed over by
 * its SMTP sessions, `connections` at a time. Answers its CPU in microseconds
 * once every message was taken.
 */
import { composeMime } from '@mail/delivery/dist/domain/mime';
import { SmtpSession } from '@mail/delivery/dist/sending/smtp-client';

export interface OwnClientJob {
  host: string;
  port: number;
  connections: number;
  messages: number;
  html: string;
  text: string;
  headers: Record<string, string>;
}

async function run(job: OwnClientJob): Promise<number> {
  const sessions = await Promise.all(
    Array.from({ length: job.connections }, () =>
      SmtpSession.open({ host: job.host, port: job.port, security: 'none', timeoutMs: 60_000 }),
    ),
  );
  const before = process.cpuUsage();
  let next = 0;
  await Promise.all(
    sessions.map(async (session) => {
      while (next < job.messages) {
        const n = next++;
        const [from, to] = ['news@bench.example.com', `reader${n}@bench.example.com`];
        const raw = composeMime({
          from: { name: null, address: from },
          to,
          replyTo: null,
          subject: `News for First${n}`,
          html: job.html,
          text: job.text,
          messageId: `${n}@bench.example.com`,
          headers: job.headers,
        });
        await session.send(from, to, raw);
      }
    }),
  );
  const used = process.cpuUsage(before);
  for (const session of sessions) session.quit();
  return used.user + used.system;
}

process.once('message', (job: OwnClientJob) => {
  run(job).then(
    (cpuMicroseconds) => process.send!({ cpuMicroseconds }, () => process.exit(0)),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});

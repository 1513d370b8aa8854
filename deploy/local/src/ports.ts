import { randomInt } from 'node:crypto';
import net from 'node:net';

/**
 * Where freePorts draws from: below the range the kernel picks the client end
 * of a connection from (net.ipv4.ip_local_port_range, 32768 and up by
 * default), since such an end takes its port while a server is down for a
 * restart and holds it until a minute after it closes; and clear of
 * infra.sh's default ports. Each jest worker draws from a slice of its own, so
 * that two test files running at once cannot both draw a port before either
 * binds it; and a second `npm test` beside the first from a band of its own
 * (TEST_PORT_BAND, which deploy/local/test.sh sets), where its workers have
 * the same numbers.
 */
const FREE_PORTS_FROM = 10_000;
const FREE_PORTS_SLICE = 1_000;
const FREE_PORTS_SLICES = 5;
const FREE_PORTS_BANDS = 2;

/**
 * This process's slice: [from, below). Slice 0 outside jest; jest workers (JEST_WORKER_ID 1, 2, ...) from 1 on;
 * in band 0 or 1.
 */
export function freePortRange(workerId = process.env.JEST_WORKER_ID, band = process.env.TEST_PORT_BAND): [number, number] {
  const slice = (Number(band ?? 0) % FREE_PORTS_BANDS) * FREE_PORTS_SLICES + (Number(workerId ?? 0) % FREE_PORTS_SLICES);
  const from = FREE_PORTS_FROM + slice * FREE_PORTS_SLICE;
  return [from, from + FREE_PORTS_SLICE];
}

/** Free ports of 127.0.0.1, drawn at random from this process's slice and all held at once so they differ. */
export async function freePorts(count: number): Promise<number[]> {
  const [from, below] = freePortRange();
  const servers: net.Server[] = [];
  try {
    for (let attempt = 0; servers.length < count; attempt++) {
      if (attempt === 1_000) throw new Error(`no ${count} free ports between ${from} and ${below}`);
      const server = net.createServer();
      const listening = await new Promise<boolean>((resolve) => {
        server.once('error', () => resolve(false));
        server.listen(randomInt(from, below), '127.0.0.1', () => resolve(true));
      });
      if (listening) servers.push(server);
    }
    return servers.map((server) => (server.address() as net.AddressInfo).port);
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

import * as grpc from '@grpc/grpc-js';
import { createClient } from '../src/grpc-client';
import { healthDefinition } from '../src/grpc-health';
import { startGrpcServer, type RunningGrpcServer } from '../src/grpc-server';
import { Readiness } from '../src/health';

/**
 * Two real gRPC servers behind one target, as a headless Service's DNS name
 * resolves to one address per pod. Each answers the health check of its own
 * name and NOT_FOUND for the other's, which shows which one took a call.
 */
type HealthClient = grpc.Client & {
  Check(request: { service: string }, callback: (error: grpc.ServiceError | null, response: { status: number }) => void): void;
};

let servers: RunningGrpcServer[];
let client: HealthClient;

beforeAll(async () => {
  servers = await Promise.all(
    ['first', 'second'].map((name) =>
      startGrpcServer(
        '127.0.0.1:0',
        [],
        new Readiness().add(name, () => Promise.resolve()),
      ),
    ),
  );
  const target = `ipv4:${servers.map((server) => `127.0.0.1:${server.port}`).join(',')}`;
  client = createClient(healthDefinition(), target) as unknown as HealthClient;
});

afterAll(async () => {
  client?.close();
  await Promise.all((servers ?? []).map((server) => server.drain(1_000)));
});

/** Which server answered a call. */
const answeredBy = (): Promise<'first' | 'second'> =>
  new Promise((resolve, reject) =>
    client.Check({ service: 'first' }, (error) => {
      if (!error) resolve('first');
      else if (error.code === grpc.status.NOT_FOUND) resolve('second');
      else reject(error);
    }),
  );

describe('createClient', () => {
  it('spreads the calls of one channel over every address of its target (round_robin)', async () => {
    // Until both connections are up, calls go to those that are.
    const seen = new Set<string>();
    for (const deadline = Date.now() + 5_000; seen.size < 2 && Date.now() < deadline;) seen.add(await answeredBy());
    expect([...seen].sort()).toEqual(['first', 'second']);

    const answers: string[] = [];
    for (let i = 0; i < 20; i++) answers.push(await answeredBy());
    expect(answers.filter((server) => server === 'first')).toHaveLength(10);
    expect(answers.filter((server) => server === 'second')).toHaveLength(10);
  });
});

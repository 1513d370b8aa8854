import { createClickHouse } from '@mail/event-store';
import { clickHouseReleaseLine, infraEnv, releaseOf } from '@mail/local';

// The single-node suite runs on the release line the containers and manifests deploy (docs/cluster.md, "Engines"):
// an older server under CLICKHOUSE_URL fails here, by name, rather than somewhere in the SQL.
test('the ClickHouse under test is not older than the release line the containers and manifests deploy', async () => {
  const client = createClickHouse(infraEnv().clickhouseUrl, 'system');
  try {
    const result = await client.query({ query: 'SELECT version() AS version', format: 'JSONEachRow' });
    const [{ version }] = await result.json<{ version: string }>();
    const [major, minor] = releaseOf(version);
    const [wantedMajor, wantedMinor] = releaseOf(clickHouseReleaseLine());
    expect({ version, atLeastReleaseLine: major > wantedMajor || (major === wantedMajor && minor >= wantedMinor) }).toEqual({
      version,
      atLeastReleaseLine: true,
    });
  } finally {
    await client.close();
  }
});

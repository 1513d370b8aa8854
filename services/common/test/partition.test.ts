import crypto from 'node:crypto';
import { Partitioners, type PartitionMetadata } from 'kafkajs';
import { murmur2, partitionOfKey } from '../src/partition';

// The producers' partitioner must agree with Kafka's default one, key for key: a recipient's events stay in one
// partition, in order, only if every producer of the topic places them alike.

it('gives the murmur2 values of Kafka’s own tests (UtilsTest.testMurmur2)', () => {
  expect(murmur2('21')).toBe(-973932308);
  expect(murmur2('foobar')).toBe(-790332482);
  expect(murmur2('a-little-bit-long-string')).toBe(-985981536);
  expect(murmur2('a-little-bit-longer-string')).toBe(-1486304829);
  expect(murmur2('lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8')).toBe(-58897971);
  expect(murmur2('abc')).toBe(479470107);
});

it('picks the partition kafkajs’s default partitioner picks, for any key and partition count', () => {
  const alphabets = ['abcdefghijklmnopqrstuvwxyz0123456789@.-_+', 'äöüßéñçø', '日本語メール', '😀📧', '\ud800x\udfff'];
  const randomKey = (length: number): string => {
    const alphabet = [...alphabets[crypto.randomInt(alphabets.length)]];
    return Array.from({ length }, () => alphabet[crypto.randomInt(alphabet.length)]).join('');
  };
  // Lengths past the reused buffer (1,024 UTF-16 units) take the other path.
  const keys = [
    '',
    'recipient@example.com',
    'x'.repeat(1024),
    'ü'.repeat(1025),
    ...Array.from({ length: 2000 }, (_, i) => randomKey(i % 300)),
  ];
  keys.push(...Array.from({ length: 20 }, () => randomKey(1000 + crypto.randomInt(1000))));
  const partitioner = Partitioners.DefaultPartitioner();
  for (const count of [1, 3, 12, 64]) {
    const partitionMetadata: PartitionMetadata[] = Array.from({ length: count }, (_, partitionId) => ({
      partitionId,
      leader: 0,
      replicas: [0],
      isr: [0],
      offlineReplicas: [],
      partitionErrorCode: 0,
    }));
    const mismatches = keys.filter(
      (key) => partitionOfKey(key, count) !== partitioner({ topic: 'events', partitionMetadata, message: { key, value: null } }),
    );
    expect(mismatches).toEqual([]);
  }
});

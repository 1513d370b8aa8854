/**
 * The partition Kafka's default partitioner (Java's, and kafkajs's
 * `Partitioners.DefaultPartitioner`) gives a key: murmur2 of its UTF-8 bytes,
 * made positive, modulo the partition count. Java's murmur2 works on 32-bit
 * integers; kafkajs reproduces it with 64-bit Long objects, which costs
 * microseconds and several allocations per key. This is the same function in
 * 32-bit arithmetic (Math.imul), over a reused buffer.
 */

const SEED = 0x9747b28c;
const M = 0x5bd1e995;

/** Keys whose UTF-8 form fits (3 bytes per UTF-16 unit at most) are encoded here rather than into a new Buffer. */
const scratch = Buffer.allocUnsafe(3 * 1024);

export function murmur2(key: string): number {
  const data = key.length * 3 <= scratch.length ? scratch : Buffer.from(key);
  const length = data === scratch ? scratch.write(key) : data.length;
  let h = (SEED ^ length) | 0;
  const whole = length & ~3;
  for (let i = 0; i < whole; i += 4) {
    let k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24);
    k = Math.imul(k, M);
    k ^= k >>> 24;
    k = Math.imul(k, M);
    h = Math.imul(h, M) ^ k;
  }
  const tail = length & 3;
  if (tail >= 3) h ^= data[whole + 2] << 16;
  if (tail >= 2) h ^= data[whole + 1] << 8;
  if (tail >= 1) h = Math.imul(h ^ data[whole], M);
  h ^= h >>> 13;
  h = Math.imul(h, M);
  h ^= h >>> 15;
  return h | 0;
}

/** The partition of `key` among `partitions` partitions (numbered from 0), as the default partitioner picks it. */
export function partitionOfKey(key: string, partitions: number): number {
  return (murmur2(key) & 0x7fffffff) % partitions;
}

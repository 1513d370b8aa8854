/** The hour a test send's addresses count against the workspace's quota. */
export const TEST_SEND_WINDOW_SECONDS = 3600;

/** A test send still inside the window: how many addresses it took, and in how many seconds it leaves. */
export interface RecentTestSend {
  addresses: number;
  leavesInSeconds: number;
}

/**
 * Whether `wanted` more addresses fit the quota beside the recent test sends
 * (oldest first); if not, in how many seconds enough of them will have left the
 * window for these to fit. A request for more than the whole quota never fits:
 * it is told to wait the whole window.
 */
export function testSendQuota(
  recent: RecentTestSend[],
  wanted: number,
  perHour: number,
): { fits: true } | { fits: false; retryAfterSeconds: number } {
  const used = recent.reduce((sum, send) => sum + send.addresses, 0);
  if (used + wanted <= perHour) return { fits: true };
  if (wanted > perHour) return { fits: false, retryAfterSeconds: TEST_SEND_WINDOW_SECONDS };
  let freed = 0;
  for (const send of recent) {
    freed += send.addresses;
    if (used - freed + wanted <= perHour) return { fits: false, retryAfterSeconds: Math.max(1, Math.ceil(send.leavesInSeconds)) };
  }
  return { fits: false, retryAfterSeconds: TEST_SEND_WINDOW_SECONDS };
}

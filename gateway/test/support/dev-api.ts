/** How often a read answered "busy, retry later" (503 with Retry-After) is asked again, as a client would. */
const BUSY_RETRIES = 5;
const BUSY_WAIT_MAX_MS = 5_000;

/**
 * GET `url`; a 503 with Retry-After is asked again after the wait it names
 * (at most BUSY_RETRIES times): on a starved host a read may miss its
 * deadline, which the API answers that way. Any other answer is returned.
 */
export async function readRetryingBusy(url: string, headers: Record<string, string>): Promise<Response> {
  for (let retries = 0; ; retries += 1) {
    const response = await fetch(url, { headers });
    const retryAfter = Number(response.headers.get('retry-after'));
    if (response.status !== 503 || !(retryAfter > 0) || retries === BUSY_RETRIES) return response;
    await response.body?.cancel();
    await new Promise((resolve) => setTimeout(resolve, Math.min(retryAfter * 1000, BUSY_WAIT_MAX_MS)));
  }
}

/**
 * A call to a gateway running with DEV_AUTH_ENABLED=1 (every request acts as
 * a platform admin) in `workspace`: the parsed answer, or an error naming the
 * call unless it answered 2xx. A GET is asked again while busy (readRetryingBusy).
 */
export async function devApi<T>(gatewayUrl: string, workspace: string, method: string, urlPath: string, body?: unknown): Promise<T> {
  const response =
    method === 'GET'
      ? await readRetryingBusy(`${gatewayUrl}${urlPath}`, { workspace_id: workspace })
      : await fetch(`${gatewayUrl}${urlPath}`, {
          method,
          headers: { workspace_id: workspace, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${urlPath} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

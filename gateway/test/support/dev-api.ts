/**
 * A call to a gateway running with DEV_AUTH_ENABLED=1 (every request acts as
 * a platform admin) in `workspace`: the parsed answer, or an error naming the
 * call unless it answered 2xx.
 */
export async function devApi<T>(gatewayUrl: string, workspace: string, method: string, urlPath: string, body?: unknown): Promise<T> {
  const response = await fetch(`${gatewayUrl}${urlPath}`, {
    method,
    headers: { workspace_id: workspace, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status >= 300) throw new Error(`${method} ${urlPath} answered ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

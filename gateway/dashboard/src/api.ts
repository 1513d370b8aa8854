/** The gateway endpoints the dashboard reads (gateway/openapi/*.yaml), same origin. */

export interface Membership {
  workspace_id: string;
  workspace_name: string;
  role: string;
}

export interface Me {
  id: string;
  email: string;
  display_name: string;
  memberships: Membership[];
}

/** Event counts are distinct provider events, unique counts exact distinct addresses; a rate is null on a zero denominator. */
export interface EngagementCounts {
  processed: number;
  delivered: number;
  deferred: number;
  dropped: number;
  hard_bounces: number;
  soft_bounces: number;
  spam_reports: number;
  unsubscribes: number;
  opens: number;
  machine_opens: number;
  unique_opens: number;
  clicks: number;
  unique_clicks: number;
  delivery_rate: number | null;
  open_rate: number | null;
  click_rate: number | null;
  click_to_open_rate: number | null;
  bounce_rate: number | null;
  unsubscribe_rate: number | null;
  spam_report_rate: number | null;
}

export type CountKey = { [K in keyof EngagementCounts]: EngagementCounts[K] extends number ? K : never }[keyof EngagementCounts];
export type RateKey = Exclude<keyof EngagementCounts, CountKey>;

export interface CampaignStats extends EngagementCounts {
  campaign_id: string;
  leader_by_open_rate: string | null;
  leader_by_click_rate: string | null;
}

export interface VariantStats extends EngagementCounts {
  campaign_id: string;
  variant_id: string;
  label: string | null;
  weight: number | null;
  is_active: boolean;
}

export interface SeriesBucket extends EngagementCounts {
  bucket_start: string;
}

export interface LinkStats {
  campaign_id: string;
  url: string;
  clicks: number;
  unique_clicks: number;
}

export interface SuppressionCounts {
  total: number;
  hard_bounce: number;
  soft_bounces: number;
  unsubscribe: number;
  spam_report: number;
}

export interface Stats {
  totals: EngagementCounts;
  campaigns: CampaignStats[];
  variants: VariantStats[];
  series: SeriesBucket[];
  top_links: LinkStats[];
  suppressions: SuppressionCounts;
}

export interface StatsQuery {
  date_from: string;
  date_to: string;
  interval: 'hour' | 'day';
  campaign_id?: string;
}

interface Page<T> {
  items: T[];
  total: number;
  page: number;
  page_size: number;
}

export interface CampaignSummary {
  id: string;
  name: string;
}

/** A non-2xx answer, or no answer at all (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly detail: string,
  ) {
    super(status === 0 ? detail : `${status} ${STATUS_TEXT[status] ?? 'Error'}: ${detail}`);
    this.name = 'ApiError';
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  422: 'Unprocessable Content',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

const PAGE_SIZE = 500;

export class Api {
  constructor(private readonly token: () => string) {}

  me(signal?: AbortSignal): Promise<Me> {
    return this.get<Me>('/auth/me', undefined, {}, signal);
  }

  campaigns(workspaceId: string, signal?: AbortSignal): Promise<CampaignSummary[]> {
    return this.all<CampaignSummary>('/email-campaigns/', workspaceId, signal);
  }

  stats(workspaceId: string, query: StatsQuery, signal?: AbortSignal): Promise<Stats> {
    const params: Record<string, string> = { date_from: query.date_from, date_to: query.date_to, interval: query.interval };
    if (query.campaign_id) params.campaign_id = query.campaign_id;
    return this.get<Stats>('/campaign-events/stats', workspaceId, params, signal);
  }

  private async all<T>(path: string, workspaceId: string | undefined, signal?: AbortSignal): Promise<T[]> {
    const items: T[] = [];
    for (let page = 1; ; page++) {
      const answer = await this.get<Page<T>>(path, workspaceId, { page: String(page), page_size: String(PAGE_SIZE) }, signal);
      items.push(...answer.items);
      if (answer.items.length === 0 || items.length >= answer.total) return items;
    }
  }

  private async get<T>(path: string, workspaceId: string | undefined, params: Record<string, string>, signal?: AbortSignal): Promise<T> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    const token = this.token();
    if (token) headers.Authorization = `Bearer ${token}`;
    if (workspaceId) headers.workspace_id = workspaceId;
    const query = new URLSearchParams(params).toString();
    let response: Response;
    try {
      response = await fetch(query ? `${path}?${query}` : path, { headers, signal, credentials: 'omit', cache: 'no-store' });
    } catch (error) {
      if (signal?.aborted) throw error;
      throw new ApiError(0, 'The API cannot be reached (network error).');
    }
    const body: unknown = await response.json().catch(() => undefined);
    if (!response.ok) throw new ApiError(response.status, describeDetail(body));
    return body as T;
  }
}

/** The API's error bodies (docs/api.md): `{"detail": "..."}` or FastAPI-style validation entries. */
function describeDetail(body: unknown): string {
  const detail = (body as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail.map((entry: { loc?: unknown[]; msg?: string }) => `${(entry.loc ?? []).join('.')}: ${entry.msg ?? 'invalid'}`).join('; ');
  }
  return 'no details given';
}

import type {
  CampaignLimitsPatch,
  CampaignPreflightReport,
  CampaignRequest,
  CampaignState,
  CampaignStatus,
} from '../shared/campaign/types';
import type {
  CutoverWindow,
  MigrationListQuery,
  MigrationStatus,
  PreflightReport,
} from '../shared/migration/types';
import type { Location } from '../shared/core/lock/document';

/**
 * The command line's only way in: the HTTP API (it is a client; it never opens a store). Credentials go
 * in headers only, over https or to loopback only, never after a redirect, and appear in no error message:
 * a refusal carries the problem's title and detail, an unreachable host its URL and the network error's code.
 */

export const DEFAULT_URL = 'http://127.0.0.1:7071/api';

/**
 * Where the command line looks without `--url` or ROUTELOCK_URL: the embedded host on this machine, on
 * the port `npm start` listens on (PORT, else 7071), so one PORT moves both.
 */
export function defaultUrl(env: Readonly<Record<string, string | undefined>>): string {
  const port = env.PORT?.trim();
  if (!port) return DEFAULT_URL;
  if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535)
    throw new Error(`PORT: expected a TCP port number (1-65535), got "${port}"; or set ROUTELOCK_URL`);
  return `http://127.0.0.1:${port}/api`;
}
export const DEFAULT_TIMEOUT_MS = 30_000;

export interface ApiOptions {
  /** The host's base URL, without `/api` (a trailing `/api` or slash is accepted and dropped). */
  url: string;
  /** Sent as `x-functions-key` (a Functions host's function or host key). */
  functionKey?: string | undefined;
  /** Sent as `Authorization: Bearer …` (an Entra access token). */
  token?: string | undefined;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** An RFC 9457 problem as the API sends it (fields it may lack are optional here). */
export interface ProblemDetails {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  code?: string;
  errors?: string[];
  retryAfterSeconds?: number;
}

/** The API answered with an error status. */
export class ApiRefused extends Error {
  constructor(
    readonly status: number,
    readonly problem: ProblemDetails,
  ) {
    const title = problem.title ?? `HTTP ${status}`;
    super(problem.detail ? `${title}: ${problem.detail}` : title);
  }
}

/** No answer: connection refused, DNS, timeout. */
export class ApiUnreachable extends Error {}

export interface Page<T> {
  items: T[];
  continuation?: string;
}

export interface StartedCampaign {
  campaignId: string;
  statusUrl: string;
  created: boolean;
}

export interface AddedResources {
  added: number;
  duplicates: number;
  status: CampaignStatus;
}

export interface StartedMigration {
  migrationId: string;
  instanceId: string;
  statusUrl: string;
}

export interface CampaignListQuery {
  status?: CampaignState | undefined;
  limit?: number | undefined;
  continuation?: string | undefined;
}

/** `http://h:7071/api/` and `http://h:7071` name the same host. Errors never quote a URL that carries `@`. */
export function baseUrl(url: string): string {
  const shown = url.includes('@') ? 'the URL (not shown: it carries a user or password)' : `"${url}"`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError(`not a URL: ${shown}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
    throw new TypeError(`not an http(s) URL: ${shown}`);
  if (parsed.username || parsed.password) throw new TypeError('the URL must not carry credentials');
  return `${parsed.origin}${parsed.pathname.replace(/\/+$/, '').replace(/\/api$/, '')}`;
}

/** This machine only: `localhost`, 127.0.0.0/8, `[::1]` (plain http cannot be read on the way). */
export function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || /^127(\.\d{1,3}){3}$/.test(hostname);
}

const query = (params: Record<string, string | number | undefined>): string => {
  const entries = Object.entries(params).filter((e): e is [string, string | number] => e[1] !== undefined);
  return entries.length
    ? `?${new URLSearchParams(entries.map(([k, v]): [string, string] => [k, String(v)])).toString()}`
    : '';
};
const seg = encodeURIComponent;

export class RouteLockApi {
  private readonly base: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ApiOptions) {
    this.base = baseUrl(options.url);
    const { protocol, hostname, origin } = new URL(this.base);
    // A key or token sent over plain http to another machine is readable by anyone on the way.
    if ((options.functionKey || options.token) && protocol === 'http:' && !isLoopback(hostname))
      throw new TypeError(
        `a key or token is sent over https only (plain http only to localhost): ${origin} would expose it`,
      );
    this.headers = { accept: 'application/json, application/problem+json' };
    if (options.functionKey) this.headers['x-functions-key'] = options.functionKey;
    if (options.token) this.headers.authorization = `Bearer ${options.token}`;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.fetchImpl = options.fetch ?? fetch;
  }

  /** One request; the answer's JSON, or ApiRefused / ApiUnreachable. A POST always has a JSON body (`{}` for a command). */
  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const url = `${this.base}/api/${path}`;
    let response: Response;
    try {
      response = await this.fetchImpl(url, {
        method,
        headers: body === undefined ? this.headers : { ...this.headers, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.timeoutMs),
        // Never followed: fetch keeps x-functions-key on a redirect to another origin.
        redirect: 'manual',
      });
    } catch (error) {
      throw new ApiUnreachable(`cannot reach ${this.base}: ${networkReason(error, this.timeoutMs)}`);
    }
    const text = await response.text();
    if (response.status >= 300 && response.status < 400)
      throw new ApiRefused(response.status, {
        status: response.status,
        title: `HTTP ${response.status}`,
        detail: `${this.base} answered with a redirect${elsewhere(response.headers.get('location'), url)}; redirects are not followed (they could carry the credentials elsewhere): give --url the address that answers`,
      });
    if (!response.ok) throw new ApiRefused(response.status, problemOf(response.status, text));
    if (text === '') return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new ApiUnreachable(`${this.base} answered ${response.status} with a body that is not JSON`);
    }
  }

  startCampaign(request: CampaignRequest): Promise<StartedCampaign> {
    return this.request('POST', 'campaigns', request);
  }
  /** A campaign's dry run (docs/design.md §6.2): its preflight report, nothing written. */
  preflightCampaign(request: CampaignRequest): Promise<CampaignPreflightReport> {
    return this.request('POST', 'campaigns', { ...request, dryRun: true });
  }
  campaign(campaignId: string): Promise<CampaignStatus> {
    return this.request('GET', `campaigns/${seg(campaignId)}`);
  }
  campaigns(q: CampaignListQuery = {}): Promise<Page<CampaignStatus>> {
    return this.request('GET', `campaigns${query({ ...q })}`);
  }
  addResources(campaignId: string, resources: readonly string[]): Promise<AddedResources> {
    return this.request('POST', `campaigns/${seg(campaignId)}/resources`, { resources });
  }
  campaignCommand(campaignId: string, command: 'pause' | 'resume' | 'cancel'): Promise<CampaignStatus> {
    return this.request('POST', `campaigns/${seg(campaignId)}/${command}`, {});
  }
  updateCampaign(campaignId: string, patch: CampaignLimitsPatch): Promise<CampaignStatus> {
    return this.request('PATCH', `campaigns/${seg(campaignId)}`, patch);
  }

  startMigration(body: {
    resourceId: string;
    target: Location;
    migrationId?: string;
    window?: CutoverWindow;
  }): Promise<StartedMigration> {
    return this.request('POST', 'migrations', body);
  }
  /** A dry run (docs/design.md §6.2): the preflight report, nothing written. */
  preflightMigration(body: {
    resourceId: string;
    target: Location;
    migrationId?: string;
    window?: CutoverWindow;
  }): Promise<PreflightReport> {
    return this.request('POST', 'migrations', { ...body, dryRun: true });
  }
  migration(migrationId: string): Promise<MigrationStatus> {
    return this.request('GET', `migrations/${seg(migrationId)}`);
  }
  migrations(q: MigrationListQuery = {}): Promise<Page<MigrationStatus>> {
    return this.request('GET', `migrations${query({ ...q })}`);
  }
  cancelMigration(migrationId: string): Promise<MigrationStatus> {
    return this.request('POST', `migrations/${seg(migrationId)}/cancel`, {});
  }
  retryMigration(migrationId: string): Promise<StartedMigration> {
    return this.request('POST', `migrations/${seg(migrationId)}/retry`, {});
  }
}

/** ` to <origin>` of a redirect's target (its origin only: a path or userinfo is not echoed). */
function elsewhere(location: string | null, from: string): string {
  if (!location) return '';
  try {
    return ` to ${new URL(location, from).origin}`;
  } catch {
    return '';
  }
}

function problemOf(status: number, text: string): ProblemDetails {
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object') return parsed as ProblemDetails;
  } catch {
    // Not JSON (a proxy's page, an empty 401 from the Functions host): the status says it.
  }
  return { status, title: status === 401 ? 'Unauthorized' : status === 403 ? 'Forbidden' : `HTTP ${status}` };
}

/** Why no answer came: the network error's code (ECONNREFUSED, ENOTFOUND) or a timeout. */
function networkReason(error: unknown, timeoutMs: number): string {
  if (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError'))
    return `no answer within ${timeoutMs / 1000} s`;
  const cause =
    error instanceof Error ? (error.cause as { code?: unknown; message?: unknown } | undefined) : undefined;
  if (cause && typeof cause.code === 'string') return cause.code;
  // The URL carries no credentials (baseUrl refuses them), so undici's own words ("bad port") may show.
  if (cause && typeof cause.message === 'string') return cause.message;
  return error instanceof Error ? error.name : 'network error';
}

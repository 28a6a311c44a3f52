import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import { type EndpointDeclaration, json } from '../functions/http/endpoint';
import { HttpProblem } from '../functions/http/problem';
import type { Services } from '../functions/services';

/**
 * GET /api/metrics — the embedded host's lock metrics, from its own change stream (openapi.yaml's
 * MetricsSnapshot): the distributions `{count,p50,p75,p99,max}` from the deduplicated events'
 * measurements, `events: {name: count}`, `migrations` by outcome, `telemetryGaps`, probes. Persisted
 * beside the host's state (shared/migration/store/sqlite/telemetry.ts). Not registered in Azure, where Application
 * Insights holds the same events (the workbook deduplicates them on `eventKey`).
 */
export async function getMetrics(
  _request: HttpRequest,
  _context: InvocationContext,
  { metrics }: Pick<Services, 'metrics'>,
): Promise<HttpResponseInit> {
  if (!metrics)
    throw new HttpProblem(
      'NotFound',
      'Metrics are served by the embedded host; in Azure, see Application Insights.',
    );
  return json(200, metrics.snapshot());
}

export const metricsEndpoints: EndpointDeclaration[] = [
  {
    name: 'metrics',
    methods: ['GET'],
    route: 'metrics',
    authLevel: 'function',
    role: 'Ops.Read',
    handler: getMetrics,
  },
];

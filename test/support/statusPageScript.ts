import { runInNewContext } from 'node:vm';
import { statusPageDocument } from '../../functions/pages/statusPage';

/**
 * The status page's own script, run once in a bare VM against stubbed reads (the browser test,
 * test/statusPage.test.ts, runs it for real): for table tests of what a row shows. `bodies` answers by
 * path (`/api/ops/view/migrations`...); a path it does not name answers 404.
 */

export interface FakeElement {
  innerHTML: string;
  textContent: string;
  hidden: boolean;
  value: string;
  disabled: boolean;
}

/** What a test may take over: the reads, the timer's tick, the window's listeners (`hashchange`). */
export interface PageHooks {
  fetch?: (url: string) => Promise<{ ok: boolean; status: number; json: () => Promise<unknown> }>;
  onInterval?: (tick: () => void) => void;
  onWindowEvent?: (name: string, listener: () => void) => void;
  /** Do not wait for the first refresh to finish (its reads are held). */
  noWait?: boolean;
}

export async function runStatusPageScript(
  bodies: Record<string, unknown>,
  hash = '',
  hooks: PageHooks = {},
): Promise<(id: string) => FakeElement> {
  const page = statusPageDocument({});
  const scripts = [...page.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1] ?? '');
  if (scripts.length !== 1) throw new Error(`expected one inline script, found ${scripts.length}`);
  const elements = new Map<string, FakeElement & Record<string, unknown>>();
  const element = (id: string) => {
    if (!elements.has(id))
      elements.set(id, {
        innerHTML: '',
        textContent: '',
        hidden: false,
        value: '',
        disabled: false,
        clientWidth: 600,
        addEventListener: () => undefined,
        querySelectorAll: () => [],
        requestSubmit: () => undefined,
      });
    return elements.get(id)!;
  };
  const stubbedFetch = (url: string) => {
    const body = bodies[url.split('?')[0] ?? ''];
    return Promise.resolve({
      ok: body !== undefined,
      status: body === undefined ? 404 : 200,
      json: () => Promise.resolve(body ?? {}),
    });
  };
  class FakePlot {
    setData(): void {}
  }
  runInNewContext(scripts[0]!, {
    document: {
      getElementById: element,
      body: { dataset: { api: '/api/ops/view', metrics: '/api/metrics' } },
      activeElement: null,
    },
    fetch: hooks.fetch ?? stubbedFetch,
    location: { hash, assign: () => undefined },
    window: {
      addEventListener: (name: string, listener: () => void) => hooks.onWindowEvent?.(name, listener),
    },
    uPlot: Object.assign(FakePlot, { paths: { bars: () => () => null } }),
    setInterval: (tick: () => void) => {
      hooks.onInterval?.(tick);
      return 0;
    },
    URLSearchParams,
    Date,
    Promise,
  });
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  if (hooks.noWait) return element;
  if (!/^updated /.test(element('updated').textContent))
    throw new Error(`the page's script did not finish: ${element('updated').textContent}`);
  return element;
}

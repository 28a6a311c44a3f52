import { Router, type RouterOptions, type RouterSeams } from '../shared/core/router';

/**
 * Routers with the seams only the verification harness, its negative controls and the read-path
 * benchmark use (shared/core/router.ts `RouterSeams`): planted lock rules, a planted Cache-Control/Age
 * builder, coalescing off. They are not RouterOptions, and the product cannot import the test kit
 * (eslint.config.mjs), so no composition root can plant them.
 */
export type SeamedRouterOptions = RouterOptions & RouterSeams;

export function seamedRouter(options: SeamedRouterOptions): Router {
  const { rules, cacheHeaders, coalesceReads, readAction, ...routerOptions } = options;
  return new Router(routerOptions, {
    ...(rules === undefined ? {} : { rules }),
    ...(cacheHeaders === undefined ? {} : { cacheHeaders }),
    ...(coalesceReads === undefined ? {} : { coalesceReads }),
    ...(readAction === undefined ? {} : { readAction }),
  });
}

/** A host's router maker (`newRouter`) that plants `seams` in the router it makes. */
export function seamedRouterMaker(seams: RouterSeams): (options: RouterOptions) => Router {
  return (options) => new Router(options, seams);
}

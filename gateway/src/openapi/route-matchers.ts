import { createRequire } from 'node:module';

type PathToRegexp = (path: string, options?: object) => unknown;

const MAX_MATCHERS = 1_000;

/**
 * express-openapi-validator 5.6 compiles every documented route with
 * path-to-regexp on every request to find the one that matches (lookupRoute
 * in openapi.metadata.js): a tenth of the gateway's allocations under load,
 * and garbage the collector pauses for. The upstream fix
 * (cdimascio/express-openapi-validator#1217) is not released, so the
 * validator's copy of the module gets a memoized `pathToRegexp`: its result
 * depends only on the route and the options, and callers only read it. Drop
 * this once the validator caches its matchers itself.
 */
export function memoizeValidatorRouteMatchers(): void {
  const fromValidator = createRequire(require.resolve('express-openapi-validator'));
  const module = fromValidator('path-to-regexp') as { pathToRegexp: PathToRegexp & { memoized?: true } };
  if (module.pathToRegexp.memoized) return;
  const compile = module.pathToRegexp;
  const compiled = new Map<string, unknown>();
  const memoized = (path: string, options?: object): unknown => {
    const key = `${path}\n${JSON.stringify(options ?? {})}`;
    let matcher = compiled.get(key);
    if (matcher === undefined) {
      matcher = compile(path, options);
      if (compiled.size < MAX_MATCHERS) compiled.set(key, matcher);
    }
    return matcher;
  };
  module.pathToRegexp = Object.assign(memoized, { memoized: true as const });
}

import { createRequire } from 'node:module';
import { memoizeValidatorRouteMatchers } from '../src/openapi/route-matchers';

type Matcher = { regexp: RegExp; keys: { name: string }[] };
const validatorPathToRegexp = () =>
  (
    createRequire(require.resolve('express-openapi-validator'))('path-to-regexp') as {
      pathToRegexp: (path: string, options?: object) => Matcher;
    }
  ).pathToRegexp;

describe("the validator's route matchers", () => {
  beforeAll(() => memoizeValidatorRouteMatchers());

  it('are compiled once per route and options', () => {
    const compile = validatorPathToRegexp();
    const first = compile('/email-campaigns/:id', { sensitive: false, strict: false });
    expect(compile('/email-campaigns/:id', { sensitive: false, strict: false })).toBe(first);
    expect(compile('/email-campaigns/:id', { sensitive: true, strict: false })).not.toBe(first);
    expect(compile('/brand-guides/:id', { sensitive: false, strict: false })).not.toBe(first);
  });

  it('still match as path-to-regexp does', () => {
    const matcher = validatorPathToRegexp()('/email-campaigns/:id', { sensitive: false, strict: false });
    expect(matcher.keys.map((key) => key.name)).toEqual(['id']);
    expect(matcher.regexp.exec('/email-campaigns/0b0b0b0b-0000-4000-8000-000000000001')?.[1]).toBe('0b0b0b0b-0000-4000-8000-000000000001');
    expect(matcher.regexp.exec('/email-campaigns/')).toBeNull();
  });

  it('are wrapped once however often the app is built', () => {
    const wrapped = validatorPathToRegexp();
    memoizeValidatorRouteMatchers();
    expect(validatorPathToRegexp()).toBe(wrapped);
  });
});

import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { functionEndpoints } from '../../functions/endpoints';
import type { EndpointDeclaration } from '../../functions/http/endpoint';
import { allEndpoints } from '../../local/host';

/**
 * Registration lives beside each handler (`registerHttp(...)` in each functions/*.ts file) and the one
 * list (functions/endpoints.ts) is what the embedded host serves: a new endpoint file that is not in the
 * list fails here, so adding one never needs an edit in local/.
 */

const dir = join(__dirname, '../../functions');
// endpoints.ts is the list itself.
const files = readdirSync(dir).filter((f) => f.endsWith('.ts') && f !== 'endpoints.ts');

function isDeclaration(value: unknown): value is EndpointDeclaration {
  const v = value as Partial<EndpointDeclaration> | null;
  return (
    typeof v === 'object' &&
    v !== null &&
    typeof v.name === 'string' &&
    typeof v.route === 'string' &&
    Array.isArray(v.methods) &&
    typeof v.handler === 'function'
  );
}

/** Each file's declarations: what it hands to registerHttp, and any array of declarations it exports. */
function declaredIn(file: string): { registered: string[]; declarations: EndpointDeclaration[] } {
  const source = readFileSync(join(dir, file), 'utf8');
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const exports = require(join(dir, file)) as Record<string, unknown>;
  const registered = [...source.matchAll(/registerHttp\((\w+)\)/g)].map((m) => m[1] as string);
  const declarations = Object.values(exports)
    .filter((v): v is unknown[] => Array.isArray(v) && v.length > 0 && v.every(isDeclaration))
    .flat() as EndpointDeclaration[];
  for (const name of registered) {
    const value = exports[name];
    if (!Array.isArray(value) || !value.every(isDeclaration))
      throw new Error(`${file}: ${name} is not exported`);
  }
  return { registered, declarations };
}

/** Declarations some file makes that `list` leaves out, as `file: name`. */
function missingFrom(list: readonly EndpointDeclaration[]): string[] {
  const listed = new Set(list);
  return files.flatMap((file) =>
    declaredIn(file)
      .declarations.filter((d) => !listed.has(d))
      .map((d) => `${file}: ${d.name}`),
  );
}

test('every functions/*.ts endpoint file registers beside its handlers, and only through registerHttp', () => {
  const withEndpoints = files.filter((f) => declaredIn(f).declarations.length > 0);
  expect(withEndpoints.length).toBeGreaterThan(0);
  for (const file of withEndpoints)
    expect({ file, registered: declaredIn(file).registered.length > 0 }).toEqual({ file, registered: true });
  for (const file of files)
    expect({ file, direct: /\bapp\.http\(/.test(readFileSync(join(dir, file), 'utf8')) }).toEqual({
      file,
      direct: false,
    });
});

test('every endpoint a functions/*.ts file declares is in the one list, and the embedded host serves that list', () => {
  expect(missingFrom(functionEndpoints)).toEqual([]);
  const served = new Set(allEndpoints);
  expect(functionEndpoints.filter((e) => !served.has(e)).map((e) => e.name)).toEqual([]);
});

test('negative control: a file whose endpoints are left out of the list is caught', () => {
  const withoutLocks = functionEndpoints.filter((e) => e.route !== 'routes/{id}/prelock');
  expect(missingFrom(withoutLocks)).toEqual(['locks.ts: prelock']);
});

import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { type BuiltPackage, buildPackage, packPackage, packageSpecs } from '../../scripts/build-packages';
import {
  PackageCheckError,
  checkShippedComments,
  commentsOf,
  missingPaths,
  repoPathsInComments,
  shippedVersion,
} from '../../scripts/packageChecks';
import { MissingDependencyError, requireOptional } from '../../shared/core/optionalDependency';
import { prelink, readLock, scratchProject } from '../../testkit/scratchInstall';

/**
 * Installing the packages as a service does (docs/services.md, "Get the packages"): the version a tarball
 * carries is its CHANGELOG's, its comments name no file it does not ship, and the library installed from its
 * tarball without better-sqlite3 says what to install, then does what its README claims.
 */

jest.setTimeout(120_000);

const execFileAsync = promisify(execFile);
const root = resolve(__dirname, '../..');
const lock = readLock(root);
const temp = mkdtempSync(join(tmpdir(), 'routelock-install-'));
const repoEntries = new Set(['docs', 'shared', 'test', 'functions', 'README.md', 'package.json']);
let built: Record<string, BuiltPackage>;

beforeAll(() => {
  built = Object.fromEntries(
    packageSpecs
      .filter((s) => s.folder === 'client' || s.folder === 'library')
      .map((spec) => {
        const b = buildPackage(root, join(temp, 'built'), spec);
        b.tarball = packPackage(b, join(temp, 'tarballs'));
        return [spec.folder, b];
      }),
  );
}, 180_000);
afterAll(() => rmSync(temp, { recursive: true, force: true }));

const changelog = (...sections: string[]) => `# Changelog\n\nIntro.\n\n${sections.join('\n\n')}\n`;

describe('the version a tarball carries is its CHANGELOG', () => {
  test.each(packageSpecs.map((s) => s.folder))(
    '%s: the built package.json and the tarball name carry the version its CHANGELOG ships',
    (folder) => {
      const template = JSON.parse(readFileSync(join(root, 'packages', folder, 'package.json'), 'utf8')) as {
        name: string;
        version: string;
      };
      const log = readFileSync(join(root, 'packages', folder, 'CHANGELOG.md'), 'utf8');
      const expected = shippedVersion(template.name, template.version, log);
      const b = built[folder];
      if (!b) return; // a package this suite does not build (measured by bench install-size)
      expect(b.version).toBe(expected);
      expect(basename(b.tarball as string)).toBe(
        `${template.name.replace('@', '').replace('/', '-')}-${expected}.tgz`,
      );
      // the CHANGELOG it ships is the one that says so
      expect(readFileSync(join(b.dir, 'CHANGELOG.md'), 'utf8')).toBe(log);
    },
  );

  test('a released version ships as it is; entries under Unreleased stamp the next patch a prerelease', () => {
    const released = '## 0.2.0 (2026-12-07)\n\n- Two.';
    const first = '## 0.1.0 (2026-12-01)\n\n- First.';
    expect(shippedVersion('p', '0.2.0', changelog(released, first))).toBe('0.2.0');
    expect(shippedVersion('p', '0.2.0', changelog('## Unreleased', released, first))).toBe('0.2.0');
    expect(shippedVersion('p', '0.2.0', changelog('## Unreleased\n\n- Three.', released, first))).toBe(
      '0.2.1-unreleased',
    );
    // a package not released yet: its first release in the making
    expect(shippedVersion('p', '0.1.0', changelog('## Unreleased\n\n- First.'))).toBe('0.1.0-unreleased');
  });

  test.each([
    [
      'the template version has no section',
      '0.3.0',
      changelog('## 0.2.0 (2026-12-07)\n\n- Two.'),
      /0\.3\.0.*0\.2\.0/,
    ],
    [
      'a newer release than the template',
      '0.1.0',
      changelog('## 0.2.0 (2026-12-07)\n\n- Two.', '## 0.1.0 (2026-12-01)\n\n- One.'),
      /newest release is 0\.2\.0/,
    ],
    ['no release and nothing unreleased', '0.1.0', changelog('## Unreleased'), /no release section/],
    ['an undated release', '0.1.0', changelog('## 0.1.0\n\n- One.'), /neither/],
    [
      'Unreleased below a release',
      '0.2.0',
      changelog('## 0.2.0 (2026-12-07)\n\n- Two.', '## Unreleased\n\n- Three.'),
      /must be the first section/,
    ],
  ])('negative control: %s fails the build', (_what, version, log, message) => {
    const refused = (() => {
      try {
        shippedVersion('@routelock/x', version, log);
        return undefined;
      } catch (e) {
        return e;
      }
    })();
    expect(refused).toBeInstanceOf(PackageCheckError);
    expect((refused as PackageCheckError).code).toBe('ChangelogVersion');
    expect((refused as Error).message).toMatch(message);
  });
});

describe('shipped comments name only files the package has', () => {
  test('each built package passes, and its JavaScript ships without comments', () => {
    for (const b of Object.values(built)) {
      expect(repoPathsInComments(b.dir, b.files, new Set(['docs', 'shared', 'test', 'testkit']))).toEqual([]);
      for (const file of b.files.filter((f) => f.endsWith('.js')))
        expect(commentsOf(file, readFileSync(join(b.dir, file), 'utf8'))).toEqual([]);
    }
    // The declarations keep their doc comments (what a consumer's editor shows).
    const client = built.client as BuiltPackage;
    const dts = readFileSync(join(client.dir, 'dist/core/client.d.ts'), 'utf8');
    expect(commentsOf('client.d.ts', dts).length).toBeGreaterThan(50);
  });

  test('what counts as a path: repo folders and source files; not URLs, package names or prose', () => {
    const nothing = () => false;
    expect(
      missingPaths(
        '/** design §5 (docs/design.md §5), shared/core/client.ts, breaker.ts, test/x.test.ts. */',
        repoEntries,
        nothing,
      ).map((p) => p.path),
    ).toEqual(['docs/design.md', 'shared/core/client.ts', 'breaker.ts', 'test/x.test.ts']);
    expect(
      missingPaths(
        '// https://example.com/docs/design.md, @routelock/client/testing, read/write, Node.js, core/inflight, express.json()',
        repoEntries,
        nothing,
      ),
    ).toEqual([]);
    // a file the package has is fine
    expect(missingPaths('/** see README.md and dist/core/client.d.ts */', repoEntries, () => true)).toEqual(
      [],
    );
  });

  test('negative control: a planted comment fails the build, named by file and line', () => {
    const client = built.client as BuiltPackage;
    const copy = join(temp, 'planted-client');
    cpSync(client.dir, copy, { recursive: true });
    const file = join(copy, 'dist/core/client.d.ts');
    writeFileSync(
      file,
      `${readFileSync(file, 'utf8')}\n/**\n * See docs/design.md §5.4\n * and shared/core/inflight.ts.\n */\nexport {};\n`,
    );
    const lines = readFileSync(file, 'utf8').split('\n').length;
    const check = () => checkShippedComments(client.name, copy, client.files, repoEntries);
    expect(check).toThrow(PackageCheckError);
    expect(check).toThrow(`dist/core/client.d.ts:${lines - 4}: docs/design.md`);
    expect(check).toThrow(`dist/core/client.d.ts:${lines - 3}: shared/core/inflight.ts`);
    // a comment in a JavaScript file is checked too
    writeFileSync(join(copy, 'dist/core/client.js'), `// shared/core/client.ts\n`);
    expect(repoPathsInComments(copy, ['dist/core/client.js'], repoEntries)).toEqual([
      'dist/core/client.js:1: shared/core/client.ts',
    ]);
  });
});

describe('requireOptional', () => {
  test('only the dependency itself missing is a MissingDependencyError; anything else as it was', () => {
    const missing = Object.assign(new Error("Cannot find module 'better-sqlite3'\nRequire stack:\n- x.js"), {
      code: 'MODULE_NOT_FOUND',
    });
    const nested = Object.assign(new Error("Cannot find module 'bindings'"), { code: 'MODULE_NOT_FOUND' });
    const abi = Object.assign(new Error('was compiled against a different Node.js version'), {
      code: 'ERR_DLOPEN_FAILED',
    });
    const attempt = (error: Error) => () =>
      requireOptional('better-sqlite3', 'install it', () => {
        throw error;
      });
    expect(attempt(missing)).toThrow(MissingDependencyError);
    expect(attempt(nested)).toThrow(nested);
    expect(attempt(abi)).toThrow(abi);
    expect(requireOptional('x', 'install it', () => 42)).toBe(42);
  });
});

/** Run `source` in `project` (as `file`), its stdout's last line parsed as JSON. */
async function runIn(
  project: string,
  file: string,
  source: string,
  env: Record<string, string> = {},
): Promise<Record<string, unknown>> {
  writeFileSync(join(project, file), source);
  const { stdout } = await execFileAsync(process.execPath, [join(project, file)], {
    cwd: project,
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', ...env },
    timeout: 60_000,
  });
  return JSON.parse(stdout.trim().split('\n').pop() as string) as Record<string, unknown>;
}

describe('@routelock/library installed from its tarball', () => {
  let project: string;
  const dbPath = () => join(temp, 'library.db');
  beforeAll(() => {
    const manifest = JSON.parse(
      readFileSync(join((built.library as BuiltPackage).dir, 'package.json'), 'utf8'),
    ) as {
      dependencies: Record<string, string>;
    };
    project = scratchProject(root, lock, {
      temp,
      name: 'library-without-sqlite',
      tarballs: [(built.library as BuiltPackage).tarball as string],
      deps: Object.keys(manifest.dependencies),
      npmArgs: ['--omit=optional'],
    });
  }, 120_000);

  test.each([
    ['require', ['-e', "require('@routelock/library/sqlite')"]],
    ['import', ['--input-type=module', '-e', "import '@routelock/library/sqlite'"]],
  ])(
    'without better-sqlite3, through %s: the SQLite entry says what to install and why, no resolver stack',
    async (_how, args) => {
      const uncaught = await execFileAsync(process.execPath, args, { cwd: project, encoding: 'utf8' }).then(
        () => ({ stderr: '', code: 0 }),
        (e: { stderr: string; code: number }) => e,
      );
      expect(uncaught.code).toBe(1);
      expect(uncaught.stderr).toContain('MissingDependencyError: The SQLite store');
      expect(uncaught.stderr).toContain('npm install better-sqlite3');
      expect(uncaught.stderr).toContain('optional peer because it is a native module');
      expect(uncaught.stderr).not.toContain('Require stack');
    },
  );

  test('without better-sqlite3: the entry and openRouter under ROUTELOCK_STORE=sqlite throw it, typed', async () => {
    const out = await runIn(
      project,
      'missing.cjs',
      `const lib = require('@routelock/library');
const shape = (e) => ({ name: e.name, code: e.code, dependency: e.dependency, isTyped: e instanceof lib.MissingDependencyError, message: e.message });
(async () => {
  let entry = 'loaded';
  try { require('@routelock/library/sqlite'); } catch (e) { entry = shape(e); }
  const viaConfig = await lib.openRouter({ env: { ROUTELOCK_STORE: 'sqlite', ROUTELOCK_SQLITE_PATH: ${JSON.stringify(dbPath())} } }).then(() => 'opened', shape);
  const loaded = Object.keys(require.cache).some((f) => f.includes('better-sqlite3'));
  console.log(JSON.stringify({ entry, viaConfig, loaded }));
})();
`,
    );
    const refusal = {
      name: 'MissingDependencyError',
      code: 'MODULE_NOT_FOUND',
      dependency: 'better-sqlite3',
      isTyped: true,
      message: expect.stringContaining('npm install better-sqlite3'),
    };
    expect(out).toEqual({ entry: refusal, viaConfig: refusal, loaded: false });
  });

  describe('every claim of its README holds', () => {
    const readme = () => readFileSync(join((built.library as BuiltPackage).dir, 'README.md'), 'utf8');
    beforeAll(() => prelink(root, lock, project, ['better-sqlite3']), 60_000);

    test('install: from the tarball `npm run packages -- --pack` writes, better-sqlite3 beside it for SQLite', () => {
      expect(readme()).toContain('npm run packages -- --pack');
      expect(readme()).toContain('routelock-library-<version>.tgz');
      expect(readme()).toMatch(/Not on the npm registry yet/);
      expect(basename((built.library as BuiltPackage).tarball as string)).toMatch(
        /^routelock-library-.+\.tgz$/,
      );
    });

    test('its example, the exports it names, read-only by default with RouteLockError ReadOnlyRouter (status 403)', async () => {
      const out = await runIn(
        project,
        'claims.cjs',
        `const lib = require('@routelock/library');
const cosmosOnly = Object.keys(require.cache).some((f) => f.includes('better-sqlite3'));
const { SqliteStore } = require('@routelock/library/sqlite');
(async () => {
  const names = ['createRouter', 'openRouter', 'CosmosStore', 'openStore', 'decide', 'decisionStatus', 'withinGrace', 'RouteLockError', 'errorKind', 'errorCodes', 'parseConfig', 'MissingDependencyError'];
  const exported = Object.fromEntries(names.map((n) => [n, n in lib]));
  // The README's example, on the SQLite store (its Cosmos DB variables are the deployment's).
  const router = await lib.openRouter();
  const seed = lib.createRouter({ store: new SqliteStore(process.env.ROUTELOCK_SQLITE_PATH), timing: lib.parseConfig(process.env).timing, allowMutations: true });
  await seed.createRoute('conv-42', { region: 'westeurope', account: 'chatweu01' });
  const { view } = await router.view('conv-42');
  const answer = lib.decisionStatus(lib.decide(view, 'write', { region: 'westeurope', account: 'chatweu01' }));
  const refused = await router.createRoute('conv-43', { region: 'westeurope' }).then(() => 'written', (e) => ({
    isError: e instanceof lib.RouteLockError, code: e.code, status: e.status, table: lib.errorKind(e.code).status,
  }));
  const timing = lib.parseConfig(process.env).timing;
  const writer = lib.createRouter({ store: new SqliteStore(process.env.ROUTELOCK_SQLITE_PATH), timing, allowMutations: true });
  const created = (await writer.createRoute('conv-44', { region: 'westeurope' })).created;
  const after = lib.decide((await lib.createRouter({ store: new SqliteStore(process.env.ROUTELOCK_SQLITE_PATH), timing }).view('conv-44')).view, 'write', { region: 'westeurope' });
  console.log(JSON.stringify({ exported, cosmosOnly, answer: { proceed: answer.proceed, kind: lib.decide(view, 'write', { region: 'eastus' }).kind }, refused, created, after: after.kind }));
})().catch((e) => { console.error(e); process.exit(1); });
`,
        { ROUTELOCK_STORE: 'sqlite', ROUTELOCK_SQLITE_PATH: dbPath() },
      );
      expect(out).toEqual({
        exported: expect.objectContaining({ createRouter: true }),
        cosmosOnly: false,
        answer: { proceed: true, kind: 'notHere' },
        refused: { isError: true, code: 'ReadOnlyRouter', status: 403, table: 403 },
        created: true,
        after: 'allow',
      });
      expect(Object.values(out.exported as Record<string, boolean>).every(Boolean)).toBe(true);
      expect(readme()).toContain('`RouteLockError` code `ReadOnlyRouter` (`status` 403)');
    });
  });
});

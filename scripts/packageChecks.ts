/**
 * What `npm run packages` holds every package to besides its dependencies (scripts/build-packages.ts):
 *
 * - its version is the one its CHANGELOG ships: the template's version has a dated section
 *   (`## 0.1.0 (2026-12-01)`), the newest one; entries under `## Unreleased` above it make the build stamp
 *   a prerelease (`0.1.1-unreleased`; a package not yet released, `0.1.0-unreleased`), so a tarball never
 *   carries a released version with changes that release does not list;
 * - the comments it ships name no file it does not ship (a repo path such as `docs/design.md` or
 *   `shared/core/client.ts` means nothing in a service's node_modules).
 *
 * Pure over text and file lists, so the tests can plant each mistake.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as ts from 'typescript';

/** A package template its build refuses: `code` says which rule, the message what to change. */
export class PackageCheckError extends Error {
  override readonly name = 'PackageCheckError';
  constructor(
    readonly code: 'ChangelogVersion' | 'RepoPathInComment',
    message: string,
  ) {
    super(message);
  }
}

export const unreleasedTag = 'unreleased';

/** `## 0.1.0 (2026-12-01)`: a release, dated. */
const releaseHeading = /^## (\d+)\.(\d+)\.(\d+) \((\d{4}-\d{2}-\d{2})\)$/;

interface Section {
  heading: string;
  /** Non-blank lines under it. */
  entries: number;
}

function sectionsOf(changelog: string): Section[] {
  const sections: Section[] = [];
  for (const line of changelog.split('\n')) {
    if (line.startsWith('## ')) sections.push({ heading: line.trim(), entries: 0 });
    else if (line.trim() !== '' && sections.length > 0) (sections[sections.length - 1] as Section).entries++;
  }
  return sections;
}

/**
 * The version a package built from `template` (its package.json version) and `changelog` ships: the
 * template's version when the CHANGELOG's newest section is that release; the next patch's prerelease
 * (`X.Y.(Z+1)-unreleased`, after X.Y.Z and before whatever is released next) when `## Unreleased` above it
 * has entries; `X.Y.Z-unreleased` for a package with entries under `## Unreleased` and no release yet (its
 * first release, X.Y.Z, in the making). Throws `ChangelogVersion` for a heading that is neither, a release without a date, a
 * template version the CHANGELOG does not list or that is not its newest, or `Unreleased` below a release.
 */
export function shippedVersion(name: string, templateVersion: string, changelog: string): string {
  const refuse = (why: string): never => {
    throw new PackageCheckError('ChangelogVersion', `${name}: ${why}`);
  };
  const sections = sectionsOf(changelog);
  const bad = sections.find((s) => s.heading !== '## Unreleased' && !releaseHeading.test(s.heading));
  if (bad)
    refuse(`CHANGELOG heading "${bad.heading}" is neither "## Unreleased" nor "## X.Y.Z (YYYY-MM-DD)"`);
  const releases = sections.filter((s) => s.heading !== '## Unreleased');
  const newest = releases[0];
  const match = newest ? releaseHeading.exec(newest.heading) : null;
  const pending = sections[0]?.heading === '## Unreleased' && (sections[0] as Section).entries > 0;
  // A package never released yet: its template's version is its first release, still in the making.
  if (!match && pending) return `${templateVersion}-${unreleasedTag}`;
  if (!match) return refuse(`package.json says ${templateVersion}, and CHANGELOG.md has no release section`);
  const [, major, minor, patch] = match;
  const released = `${major}.${minor}.${patch}`;
  if (released !== templateVersion)
    refuse(
      `package.json says ${templateVersion}, but CHANGELOG.md's newest release is ${released}: ` +
        `make them the same version`,
    );
  if (sections.findIndex((s) => s.heading === '## Unreleased') > 0)
    refuse('"## Unreleased" must be the first section, above every release');
  return pending ? `${major}.${minor}.${Number(patch) + 1}-${unreleasedTag}` : templateVersion;
}

/** The comments of a JavaScript or declaration file, each with its 1-based line. */
export function commentsOf(fileName: string, text: string): { line: number; text: string }[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false);
  const seen = new Map<number, { line: number; text: string }>();
  const collect = (ranges: readonly ts.CommentRange[] | undefined): void => {
    for (const range of ranges ?? []) {
      if (seen.has(range.pos)) continue;
      const line = source.getLineAndCharacterOfPosition(range.pos).line + 1;
      seen.set(range.pos, { line, text: text.slice(range.pos, range.end) });
    }
  };
  const visit = (node: ts.Node): void => {
    collect(ts.getLeadingCommentRanges(text, node.getFullStart()));
    collect(ts.getTrailingCommentRanges(text, node.getEnd()));
    node.forEachChild(visit);
  };
  visit(source);
  collect(ts.getLeadingCommentRanges(text, source.endOfFileToken.getFullStart()));
  return [...seen.values()].sort((a, b) => a.line - b.line);
}

/** Words of prose that look like file names. */
const proseNames = new Set(['Node.js']);
const fileExtensions = /\.(?:ts|tsx|mts|cts|js|mjs|cjs|md|json|bicep|ya?ml|sh|sql)$/;

/**
 * The file paths `comment` names that do not exist in the package: a token with a slash whose first
 * segment is one of `repoEntries` (the checkout's top-level folders and files, so `read/write` or
 * `@routelock/client/testing` are not paths), or any token ending in a source file's extension; each
 * looked up from the package root and from the commenting file's folder. URLs are fine.
 */
export function missingPaths(
  comment: string,
  repoEntries: ReadonlySet<string>,
  exists: (path: string) => boolean,
): { path: string; index: number }[] {
  const text = comment.replace(/\bhttps?:\/\/\S+/g, (url) => ' '.repeat(url.length));
  // Not followed by `(`: `express.json()` is a call, not a file.
  const tokens = [...text.matchAll(/(?<![\w@/.-])[\w.-]+(?:\/[\w.-]*)*(?![\w/(-])/g)].map((m) => ({
    path: m[0].replace(/\.+$/, ''),
    index: m.index,
  }));
  return tokens.filter(({ path }) => {
    if (proseNames.has(path)) return false;
    const slash = path.indexOf('/');
    const repoPath = slash > 0 && repoEntries.has(path.slice(0, slash));
    return (repoPath || fileExtensions.test(path)) && !exists(path);
  });
}

/**
 * Every comment of the package's JavaScript and declarations (`files`, relative to `dir`) that names a
 * file the package does not ship, as `file:line: path`. The READMEs and CHANGELOG are prose about
 * routelock and name its repository on purpose; they are not checked.
 */
export function repoPathsInComments(
  dir: string,
  files: readonly string[],
  repoEntries: ReadonlySet<string>,
): string[] {
  const found: string[] = [];
  for (const file of files.filter((f) => /\.(?:js|mjs|d\.ts|d\.mts)$/.test(f))) {
    const exists = (path: string): boolean =>
      existsSync(join(dir, path)) || existsSync(join(dir, dirname(file), path));
    for (const comment of commentsOf(file, readFileSync(join(dir, file), 'utf8')))
      for (const { path, index } of missingPaths(comment.text, repoEntries, exists)) {
        const line = comment.line + comment.text.slice(0, index).split('\n').length - 1;
        found.push(`${file}:${line}: ${path}`);
      }
  }
  return found;
}

/** Throws `RepoPathInComment` naming each comment's path the package does not ship. */
export function checkShippedComments(
  name: string,
  dir: string,
  files: readonly string[],
  repoEntries: ReadonlySet<string>,
): void {
  const found = repoPathsInComments(dir, files, repoEntries);
  if (found.length > 0)
    throw new PackageCheckError(
      'RepoPathInComment',
      `${name}: its comments name files it does not ship (cite the design as "routelock design §N" and ` +
        `other modules by what they export):\n  ${found.join('\n  ')}`,
    );
}

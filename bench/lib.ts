import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';

/** Shared helpers for the benchmarks: machine facts, repeats and medians, tables, result files. */

export interface Machine {
  cores: number;
  cpu: string;
  memoryGiB: number;
  node: string;
  platform: string;
  date: string;
}

export function machine(): Machine {
  const list = cpus();
  return {
    cores: list.length,
    cpu: list[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    date: new Date().toISOString(),
  };
}

export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

export function percentileOf(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

export function table(headers: string[], rows: (string | number)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => (typeof c === 'number' ? format(c) : c)))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => String(r[i] ?? '').length)));
  const line = (r: (string | number)[]) =>
    `| ${r.map((c, i) => String(c).padEnd(widths[i] as number)).join(' | ')} |`;
  return [
    line(cells[0] as string[]),
    `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`,
    ...cells.slice(1).map(line),
  ].join('\n');
}

export function format(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (Number.isInteger(n)) return Math.abs(n) >= 1000 ? n.toLocaleString('en-US') : String(n);
  if (Math.abs(n) >= 100) return n.toFixed(0);
  if (Math.abs(n) >= 1) return n.toFixed(2);
  return n.toPrecision(3);
}

export interface BenchResult {
  name: string;
  machine: Machine;
  quick: boolean;
  /** The printed table. */
  table: string;
  data: unknown;
}

export function writeResult(dir: string, result: BenchResult): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${result.name}.json`);
  writeFileSync(path, `${JSON.stringify(result, null, 2)}\n`);
  return path;
}

export const heapMiB = (): number => Math.round((process.memoryUsage().heapUsed / 2 ** 20) * 10) / 10;

export async function settleGc(): Promise<void> {
  (globalThis as { gc?: () => void }).gc?.();
  await new Promise((r) => setImmediate(r));
}

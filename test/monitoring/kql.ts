// The bridge (a .NET runtime for JavaScript) first, then the language service on it: both set globals.
import '@kusto/language-service-next/bridge.min.js';
import '@kusto/language-service-next/Kusto.Language.Bridge.min.js';
import {
  availabilityNames,
  telemetryEventNames,
  telemetryMetricNames,
} from '../../shared/migration/telemetry/names';

/**
 * Checking KQL as Azure Monitor would run it: parsed and analysed by Kusto.Language
 * (@kusto/language-service-next) against the Application Insights tables routelock's queries read, each
 * declared with the columns it has, so a syntax error, an unknown column or table, and a misspelt function
 * are diagnostics. Then every `name == "X"` / `name in (…)` on a table is checked against the catalogue of
 * that table's kind (shared/migration/telemetry/names.ts for events, metrics and availability tests; the function
 * names for `requests`).
 */

// The bridge defines a global `Kusto` (its .d.ts is the whole language service); only this much is used.
interface Symbol {
  Name: string;
}
interface SyntaxNode {
  toString(): string;
  WalkElements(action: (element: SyntaxNode) => void): void;
}
interface Diagnostic {
  Severity: string;
  Message: string;
  Start: number;
}
interface KustoLanguage {
  Symbols: {
    ScalarTypes: Record<'String' | 'DateTime' | 'Dynamic' | 'Real' | 'Int' | 'Long', unknown>;
    ColumnSymbol: new (name: string, type: unknown) => Symbol;
    TableSymbol: { $ctor4: new (name: string, columns: Symbol[]) => Symbol & { Columns: List<Symbol> } };
    DatabaseSymbol: { ctor: new (name: string, tables: Symbol[]) => Symbol };
  };
  GlobalState: { Default: { WithDatabase(db: Symbol): unknown } };
  KustoCode: {
    ParseAndAnalyze(
      text: string,
      globals: unknown,
    ): {
      Syntax: SyntaxNode;
      GetDiagnostics(): List<Diagnostic>;
    };
  };
  Syntax: Record<
    'NameReference' | 'BinaryExpression' | 'InExpression' | 'LiteralExpression' | 'ExpressionList',
    abstract new (...args: never[]) => unknown
  >;
}
interface List<T> {
  Count: number;
  getItem(i: number): T;
}
interface NameReference extends SyntaxNode {
  SimpleName: string;
  ReferencedSymbol: Symbol | null;
}
interface BinaryExpression extends SyntaxNode {
  Left: SyntaxNode;
  Operator: { Text: string };
  Right: SyntaxNode;
}
interface InExpression extends SyntaxNode {
  Left: SyntaxNode;
  Operator: { Text: string };
  Right: SyntaxNode & { Expressions: List<{ Element$1: SyntaxNode }> };
}
interface LiteralExpression extends SyntaxNode {
  LiteralValue: unknown;
}

function kusto(): KustoLanguage {
  return (globalThis as unknown as { Kusto: { Language: KustoLanguage } }).Kusto.Language;
}

type ColumnType = 'string' | 'datetime' | 'dynamic' | 'real' | 'int';

/** The classic Application Insights tables (what a query scoped to the component reads), as far as used. */
const common: Record<string, ColumnType> = {
  timestamp: 'datetime',
  itemId: 'string',
  itemType: 'string',
  itemCount: 'int',
  customDimensions: 'dynamic',
  operation_Id: 'string',
  operation_Name: 'string',
  cloud_RoleName: 'string',
  cloud_RoleInstance: 'string',
  appName: 'string',
};
export const appInsightsTables: Record<string, Record<string, ColumnType>> = {
  customEvents: { ...common, name: 'string', customMeasurements: 'dynamic' },
  customMetrics: {
    ...common,
    name: 'string',
    value: 'real',
    valueCount: 'int',
    valueSum: 'real',
    valueMin: 'real',
    valueMax: 'real',
    valueStdDev: 'real',
  },
  // `success` is a string in the classic schema ("1"/"0"; the queries compare it as text)
  availabilityResults: {
    ...common,
    id: 'string',
    name: 'string',
    location: 'string',
    success: 'string',
    message: 'string',
    duration: 'real',
    customMeasurements: 'dynamic',
  },
  requests: {
    ...common,
    id: 'string',
    name: 'string',
    url: 'string',
    success: 'string',
    resultCode: 'string',
    duration: 'real',
    customMeasurements: 'dynamic',
  },
};

/** What each table's `name` must be one of. */
export type NameCatalogue = Record<string, readonly string[]>;

export function nameCatalogue(functionNames: readonly string[]): NameCatalogue {
  return {
    customEvents: telemetryEventNames,
    customMetrics: telemetryMetricNames,
    availabilityResults: availabilityNames,
    requests: functionNames,
  };
}

interface Analysis {
  globals: unknown;
  /** Each table's `name` column symbol, to tell which table a comparison reads. */
  nameColumns: Map<Symbol, string>;
}
let analysis: Analysis | undefined;
function globals(): Analysis {
  if (analysis) return analysis;
  const K = kusto();
  const S = K.Symbols;
  const types: Record<ColumnType, unknown> = {
    string: S.ScalarTypes.String,
    datetime: S.ScalarTypes.DateTime,
    dynamic: S.ScalarTypes.Dynamic,
    real: S.ScalarTypes.Real,
    int: S.ScalarTypes.Int,
  };
  const nameColumns = new Map<Symbol, string>();
  const tables = Object.entries(appInsightsTables).map(([table, columns]) => {
    const symbols = Object.entries(columns).map(([column, type]) => {
      const symbol = new S.ColumnSymbol(column, types[type]);
      if (column === 'name') nameColumns.set(symbol, table);
      return symbol;
    });
    return new S.TableSymbol.$ctor4(table, symbols);
  });
  analysis = {
    globals: K.GlobalState.Default.WithDatabase(new S.DatabaseSymbol.ctor('appinsights', tables)),
    nameColumns,
  };
  return analysis;
}

export interface QueryFindings {
  /** Kusto.Language's diagnostics (syntax and semantics), "line:column message". */
  diagnostics: string[];
  /** Names compared with a table's `name` that its catalogue does not have, or comparisons not checkable. */
  names: string[];
  /** Every name literal found, by table (what the query reads). */
  used: Record<string, string[]>;
}

/** Parse and analyse one query, and check its name literals against `catalogue`. */
export function checkQuery(text: string, catalogue: NameCatalogue): QueryFindings {
  const K = kusto();
  const { globals: state, nameColumns } = globals();
  const code = K.KustoCode.ParseAndAnalyze(text, state);
  const list = code.GetDiagnostics();
  const diagnostics: string[] = [];
  for (let i = 0; i < list.Count; i += 1) {
    const d = list.getItem(i);
    const before = text.slice(0, d.Start).split('\n');
    diagnostics.push(`${before.length}:${(before.at(-1) ?? '').length + 1} ${d.Severity}: ${d.Message}`);
  }
  const names: string[] = [];
  const used: Record<string, string[]> = {};
  const literal = (node: SyntaxNode): string | undefined =>
    node instanceof K.Syntax.LiteralExpression && typeof (node as LiteralExpression).LiteralValue === 'string'
      ? ((node as LiteralExpression).LiteralValue as string)
      : undefined;
  const check = (left: SyntaxNode, operator: string, values: (string | undefined)[], whole: string) => {
    if (!(left instanceof K.Syntax.NameReference) || (left as NameReference).SimpleName !== 'name') return;
    const symbol = (left as NameReference).ReferencedSymbol;
    const table = symbol ? nameColumns.get(symbol) : undefined;
    if (table === undefined) {
      names.push(`\`${whole.trim()}\`: a name compared after it left its table (filter on the table itself)`);
      return;
    }
    if (!['==', 'in', '!=', '!in'].includes(operator)) {
      names.push(
        `\`${whole.trim()}\`: ${table}.name compared with ${operator} (use == or in, literals only)`,
      );
      return;
    }
    for (const value of values) {
      if (value === undefined) {
        names.push(`\`${whole.trim()}\`: ${table}.name compared with something other than a string literal`);
        continue;
      }
      (used[table] ??= []).push(value);
      if (!(catalogue[table] ?? []).includes(value)) names.push(`${table}: "${value}" is not a name it has`);
    }
  };
  code.Syntax.WalkElements((element) => {
    if (element instanceof K.Syntax.BinaryExpression) {
      const b = element as BinaryExpression;
      check(b.Left, b.Operator.Text.trim(), [literal(b.Right)], b.toString());
    } else if (element instanceof K.Syntax.InExpression) {
      const e = element as InExpression;
      const values: (string | undefined)[] = [];
      for (let i = 0; i < e.Right.Expressions.Count; i += 1)
        values.push(literal(e.Right.Expressions.getItem(i).Element$1));
      check(e.Left, e.Operator.Text.trim(), values, e.toString());
    }
  });
  return { diagnostics, names, used };
}

/**
 * A workbook query as the workbook runs it: each `{Parameter}` replaced with its value, `{TimeRange:grain}`
 * with a bin size. A placeholder the workbook does not declare is left, so it fails to parse.
 */
export function substituteParameters(text: string, values: Record<string, string>): string {
  return text.replace(/\{([A-Za-z]\w*)(?::grain)?\}/g, (whole, name: string) =>
    whole === '{TimeRange:grain}' ? '1h' : (values[name] ?? whole),
  );
}

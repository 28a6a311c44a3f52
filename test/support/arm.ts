import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Reading the compiled ARM template (infra/arm/main.json, written by `npm run infra:build`): the nested
 * module deployments, their resources, the parameters main passes, and the ARM expressions in them.
 * Expressions are parsed, never matched with regular expressions; what is constant within a template
 * (literals, variables, copy indexes, parameters a test binds) can be evaluated.
 */

export interface ArmParameter {
  type: string;
  defaultValue?: unknown;
  allowedValues?: unknown[];
  minLength?: number;
  maxLength?: number;
  minValue?: number;
  maxValue?: number;
  metadata?: { description?: string } & Record<string, unknown>;
}

export interface ArmResource {
  type: string;
  apiVersion: string;
  name: string;
  condition?: unknown;
  scope?: string;
  location?: unknown;
  kind?: string;
  tags?: unknown;
  sku?: unknown;
  identity?: unknown;
  copy?: { name: string; count: unknown };
  dependsOn?: string[];
  properties?: Record<string, unknown> | string;
}

export interface ArmTemplate {
  $schema: string;
  parameters?: Record<string, ArmParameter>;
  variables?: Record<string, unknown>;
  resources: ArmResource[];
  outputs?: Record<string, { type: string; value: unknown }>;
}

/** A module: a nested Microsoft.Resources/deployments resource and the template it deploys. */
export interface ArmModule {
  /** The deployment name (the Bicep module's `name`). */
  name: string;
  /** The template that declares the deployment ('main' for the entry point's modules). */
  parent: ArmTemplate;
  deployment: ArmResource;
  template: ArmTemplate;
  /** The parameter values as the parent passes them (expressions in the parent's scope). */
  parameters: Record<string, unknown>;
}

const deploymentType = 'Microsoft.Resources/deployments';

/** The compiled entry point; fails with how to get it when it is missing or older than the Bicep. */
export function loadArmTemplate(root: string, path = 'infra/arm/main.json'): ArmTemplate {
  const file = join(root, path);
  if (!existsSync(file)) throw new Error(`${path} is missing: run \`npm run infra:build\``);
  const compiled = statSync(file).mtimeMs;
  const sources = [
    'infra/bicep',
    'infra/bicep/modules',
    // the queries the monitoring modules load
    'infra/monitoring/workbook',
    'infra/monitoring/alerts',
  ].flatMap((dir) =>
    (existsSync(join(root, dir)) ? readdirSync(join(root, dir)) : [])
      // the Bicep and what it loads or is linted with; azd's parameter file is not compiled
      .filter(
        (f) =>
          f.endsWith('.bicep') ||
          f.endsWith('.kql') ||
          (f.endsWith('.json') && !f.endsWith('.parameters.json')),
      )
      .map((f) => join(root, dir, f)),
  );
  const newer = sources.filter((f) => statSync(f).mtimeMs > compiled);
  if (newer.length > 0) {
    throw new Error(`${path} is older than ${newer.join(', ')}: run \`npm run infra:build\``);
  }
  return JSON.parse(readFileSync(file, 'utf8')) as ArmTemplate;
}

/** The modules a template deploys, and theirs, depth first. */
export function modulesOf(template: ArmTemplate): ArmModule[] {
  return template.resources
    .filter((r) => r.type === deploymentType)
    .flatMap((deployment) => {
      const properties = deployment.properties as {
        expressionEvaluationOptions?: { scope: string };
        template?: ArmTemplate;
        parameters?: Record<string, { value: unknown }>;
      };
      if (properties.template == null)
        throw new Error(`deployment ${deployment.name} has no inline template`);
      // Bicep modules evaluate their expressions in their own scope; the tests rely on it.
      if (properties.expressionEvaluationOptions?.scope !== 'inner') {
        throw new Error(`deployment ${deployment.name} is not inner-scoped`);
      }
      const parameters = Object.fromEntries(
        Object.entries(properties.parameters ?? {}).map(([k, v]) => [k, v.value]),
      );
      const module: ArmModule = {
        name: deployment.name,
        parent: template,
        deployment,
        template: properties.template,
        parameters,
      };
      return [module, ...modulesOf(properties.template)];
    });
}

export function moduleNamed(template: ArmTemplate, name: string): ArmModule {
  const found = modulesOf(template).filter((m) => m.name === name);
  if (found.length !== 1) throw new Error(`expected one module ${name}, found ${found.length}`);
  return found[0] as ArmModule;
}

export interface Located {
  /** 'main', or the name of the module whose template declares the resource. */
  module: string;
  template: ArmTemplate;
  resource: ArmResource;
}

/** Every resource (module deployments included) of the entry point and of every nested template. */
export function allResources(template: ArmTemplate): Located[] {
  const own = (module: string, t: ArmTemplate) =>
    t.resources.map((resource) => ({ module, template: t, resource }));
  return [...own('main', template), ...modulesOf(template).flatMap((m) => own(m.name, m.template))];
}

/** Resources of a type (exact, or a pattern) anywhere in the template tree. */
export function resourcesOfType(template: ArmTemplate, type: string | RegExp): Located[] {
  return allResources(template).filter((r) =>
    typeof type === 'string' ? r.resource.type === type : type.test(r.resource.type),
  );
}

/**
 * The one resource of `type` in `template` itself (not its modules) whose last name segment is `name`
 * (a literal, or the text of the expression that names it, e.g. "parameters('name')").
 */
export function resourceIn(template: ArmTemplate, type: string, name?: string): ArmResource {
  const found = template.resources.filter(
    (r) => r.type === type && (name === undefined || nameSegments(r, template).at(-1) === name),
  );
  if (found.length !== 1) {
    throw new Error(
      `expected one ${type}${name === undefined ? '' : ` named ${name}`}, found ${found.length}`,
    );
  }
  return found[0] as ArmResource;
}

// ---------------------------------------------------------------------------------------------------
// ARM template expressions: "[fn(args).property[index]]".
// ---------------------------------------------------------------------------------------------------

export type Expr =
  | { kind: 'string'; value: string }
  | { kind: 'number'; value: number }
  | { kind: 'call'; name: string; args: Expr[] }
  | { kind: 'property'; target: Expr; name: string }
  | { kind: 'index'; target: Expr; index: Expr };

/** Whether a JSON string is an ARM expression ("[[" escapes a literal that starts with "["). */
export function isExpression(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith('[') && !value.startsWith('[[') && value.endsWith(']');
}

/** Parses "[…]" (the brackets included). */
export function parseExpression(value: string): Expr {
  if (!isExpression(value)) throw new Error(`not an ARM expression: ${value}`);
  const text = value.slice(1, -1);
  let at = 0;
  const skip = () => {
    while (text[at] === ' ') at += 1;
  };
  const fail = (what: string): never => {
    throw new Error(`ARM expression ${value}: ${what} at ${at}`);
  };
  const expect = (ch: string) => {
    skip();
    if (text[at] !== ch) fail(`expected '${ch}'`);
    at += 1;
  };
  const identifier = (): string => {
    skip();
    const m = /^[A-Za-z_$][A-Za-z0-9_$#]*/.exec(text.slice(at));
    if (!m) return fail('expected a name');
    at += m[0].length;
    return m[0];
  };
  const expression = (): Expr => {
    skip();
    let node: Expr;
    if (text[at] === "'") {
      let s = '';
      at += 1;
      for (;;) {
        if (at >= text.length) fail('unterminated string');
        if (text[at] === "'") {
          if (text[at + 1] === "'") {
            s += "'";
            at += 2;
            continue;
          }
          at += 1;
          break;
        }
        s += text[at];
        at += 1;
      }
      node = { kind: 'string', value: s };
    } else if (/[-0-9]/.test(text[at] ?? '')) {
      const m = /^-?[0-9]+/.exec(text.slice(at));
      if (!m) return fail('expected a number');
      at += m[0].length;
      node = { kind: 'number', value: Number(m[0]) };
    } else {
      const name = identifier();
      expect('(');
      const args: Expr[] = [];
      skip();
      if (text[at] === ')') at += 1;
      else {
        for (;;) {
          args.push(expression());
          skip();
          if (text[at] === ',') at += 1;
          else break;
        }
        expect(')');
      }
      node = { kind: 'call', name, args };
    }
    for (;;) {
      skip();
      if (text[at] === '.') {
        at += 1;
        node = { kind: 'property', target: node, name: identifier() };
      } else if (text[at] === '[') {
        at += 1;
        const index = expression();
        expect(']');
        node = { kind: 'index', target: node, index };
      } else return node;
    }
  };
  const parsed = expression();
  skip();
  if (at !== text.length) fail('trailing text');
  return parsed;
}

/** The text of an expression node, as ARM writes it (without the brackets). */
export function exprText(e: Expr): string {
  switch (e.kind) {
    case 'string':
      return `'${e.value.replace(/'/g, "''")}'`;
    case 'number':
      return String(e.value);
    case 'call':
      return `${e.name}(${e.args.map(exprText).join(', ')})`;
    case 'property':
      return `${exprText(e.target)}.${e.name}`;
    case 'index':
      return `${exprText(e.target)}[${exprText(e.index)}]`;
  }
}

/** A call node's arguments, checking the function name. */
export function callArgs(value: string | Expr, name: string): Expr[] {
  const e = typeof value === 'string' ? parseExpression(value) : value;
  if (e.kind !== 'call' || e.name !== name) throw new Error(`expected ${name}(…), got ${exprText(e)}`);
  return e.args;
}

/** Every function an expression calls, nested calls included. */
export function functionsCalled(e: Expr): string[] {
  switch (e.kind) {
    case 'call':
      return [e.name, ...e.args.flatMap(functionsCalled)];
    case 'property':
      return functionsCalled(e.target);
    case 'index':
      return [...functionsCalled(e.target), ...functionsCalled(e.index)];
    default:
      return [];
  }
}

/** Every string in a JSON value (object keys included), depth first. */
export function jsonStrings(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (Array.isArray(value)) return value.flatMap(jsonStrings);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) => [k, ...jsonStrings(v)]);
  }
  return [];
}

/**
 * Which module output an expression passes: "reference(<the deployment named M>, …).outputs.O.value" is
 * { module: M, output: O }; anything else undefined.
 */
export function moduleOutput(value: unknown): { module: string; output: string } | undefined {
  if (!isExpression(value)) return undefined;
  const e = parseExpression(value);
  if (e.kind !== 'property' || e.name !== 'value') return undefined;
  const output = e.target;
  if (output.kind !== 'property' || output.target.kind !== 'property' || output.target.name !== 'outputs') {
    return undefined;
  }
  const ref = output.target.target;
  if (ref.kind !== 'call' || ref.name !== 'reference') return undefined;
  const module = deploymentNamed(ref.args[0]);
  return module === undefined ? undefined : { module, output: output.name };
}

/** The deployment an id expression names: "extensionResourceId(…, 'Microsoft.Resources/deployments', 'x')" is 'x'. */
export function deploymentNamed(e: Expr | string | undefined): string | undefined {
  const node = typeof e === 'string' ? (isExpression(e) ? parseExpression(e) : undefined) : e;
  if (node?.kind !== 'call' || !['extensionResourceId', 'resourceId'].includes(node.name)) return undefined;
  const type = node.args.findIndex((a) => a.kind === 'string' && a.value === deploymentType);
  const name = node.args[type + 1];
  return type >= 0 && name?.kind === 'string' ? name.value : undefined;
}

/** The resource type and name arguments of "resourceId('<type>', n1, n2…)" (a scope, a dependsOn entry). */
export function resourceIdOf(value: string): { type: string; names: string[] } {
  const args = callArgs(value, 'resourceId');
  const [type, ...names] = args;
  if (type?.kind !== 'string') throw new Error(`resourceId without a literal type: ${value}`);
  return { type: type.value, names: names.map((n) => (n.kind === 'string' ? n.value : exprText(n))) };
}

export interface Scope {
  template: ArmTemplate;
  /** Values for the template's parameters; an unbound parameter is not constant. */
  parameters?: Record<string, unknown>;
  /** copyIndex() of the resource loop, and copyIndex('<name>') of property loops. */
  copyIndex?: number;
  loops?: Record<string, number>;
}

/**
 * Evaluates what is constant in a scope: literals, variables(), parameters() a test binds, copyIndex(),
 * property and index access, createArray, createObject, length, true, false, and property loops
 * ("copy" in an object). Throws on anything else (reference(), resourceId(), uniqueString()…).
 */
export function evaluate(value: unknown, scope: Scope): unknown {
  if (isExpression(value)) return evalExpr(parseExpression(value), scope);
  if (typeof value === 'string' && value.startsWith('[[')) return value.slice(1);
  if (Array.isArray(value)) return value.map((v) => evaluate(v, scope));
  if (value !== null && typeof value === 'object') {
    const { copy, ...rest } = value as Record<string, unknown>;
    const out: Record<string, unknown> = Object.fromEntries(
      Object.entries(rest).map(([k, v]) => [k, evaluate(v, scope)]),
    );
    for (const loop of (copy as { name: string; count: unknown; input: unknown }[] | undefined) ?? []) {
      const count = Number(evaluate(loop.count, scope));
      out[loop.name] = Array.from({ length: count }, (_, i) =>
        evaluate(loop.input, { ...scope, loops: { ...scope.loops, [loop.name]: i } }),
      );
    }
    return out;
  }
  return value;
}

function evalExpr(e: Expr, scope: Scope): unknown {
  const fail = (): never => {
    throw new Error(`not constant: ${exprText(e)}`);
  };
  switch (e.kind) {
    case 'string':
    case 'number':
      return e.value;
    case 'property': {
      const target = evalExpr(e.target, scope) as Record<string, unknown> | null;
      if (target == null || typeof target !== 'object' || !(e.name in target)) return fail();
      return target[e.name];
    }
    case 'index': {
      const target = evalExpr(e.target, scope) as Record<string | number, unknown>;
      const index = evalExpr(e.index, scope) as string | number;
      if (target == null || typeof target !== 'object' || !(index in target)) return fail();
      return target[index];
    }
    case 'call': {
      const args = () => e.args.map((a) => evalExpr(a, scope));
      switch (e.name) {
        case 'variables': {
          const name = evalExpr(e.args[0] as Expr, scope) as string;
          if (!(name in (scope.template.variables ?? {}))) return fail();
          return evaluate(scope.template.variables?.[name], scope);
        }
        case 'parameters': {
          const name = evalExpr(e.args[0] as Expr, scope) as string;
          if (scope.parameters === undefined || !(name in scope.parameters)) return fail();
          return scope.parameters[name];
        }
        case 'copyIndex': {
          const loop = e.args[0];
          const index = loop === undefined ? scope.copyIndex : scope.loops?.[evalExpr(loop, scope) as string];
          return index ?? fail();
        }
        case 'createArray':
          return args();
        case 'createObject': {
          const a = args();
          return Object.fromEntries(
            Array.from({ length: a.length / 2 }, (_, i) => [a[2 * i] as string, a[2 * i + 1]]),
          );
        }
        case 'length':
          return (args()[0] as unknown[] | string).length;
        case 'equals': {
          const [a, b] = args();
          return JSON.stringify(a) === JSON.stringify(b);
        }
        case 'if':
          return evalExpr(e.args[evalExpr(e.args[0] as Expr, scope) === true ? 1 : 2] as Expr, scope);
        case 'union': {
          // objects only (the arrays' form is not used here): later keys win, as in ARM
          const parts = args();
          if (!parts.every((p) => p !== null && typeof p === 'object' && !Array.isArray(p))) return fail();
          return Object.assign({}, ...(parts as object[]));
        }
        // string(), replace() and format() as ARM has them (the monitoring modules build queries and
        // descriptions with them): string() of a string is itself, of anything else its JSON
        case 'string': {
          const [value] = args();
          return typeof value === 'string' ? value : JSON.stringify(value);
        }
        case 'replace': {
          const [text, from, to] = args();
          if (typeof text !== 'string' || typeof from !== 'string' || typeof to !== 'string') return fail();
          return text.split(from).join(to);
        }
        case 'format': {
          const [pattern, ...values] = args();
          if (typeof pattern !== 'string') return fail();
          return pattern.replace(/\{\{|\}\}|\{(\d+)\}/g, (whole, i?: string) =>
            i === undefined ? whole.charAt(0) : String(values[Number(i)]),
          );
        }
        case 'true':
          return true;
        case 'false':
          return false;
        default:
          return fail();
      }
    }
  }
}

/**
 * The segments of a resource's name: "format('{0}/{1}', parameters('name'), 'ftp')" is
 * ["parameters('name')", 'ftp']; constant segments evaluated, the others as expression text.
 */
export function nameSegments(resource: ArmResource, template: ArmTemplate, copyIndex?: number): string[] {
  const segment = (e: Expr): string => {
    try {
      return String(evalExpr(e, { template, copyIndex }));
    } catch {
      return exprText(e);
    }
  };
  const name: string = resource.name;
  if (!isExpression(name as unknown)) return name.split('/');
  const e = parseExpression(name);
  if (e.kind === 'call' && e.name === 'format') {
    const [pattern, ...args] = e.args;
    if (pattern?.kind === 'string' && /^\{0\}(\/\{\d+\})*$/.test(pattern.value)) return args.map(segment);
  }
  return [segment(e)];
}

/** How many instances a resource loop makes (1 without a loop). */
export function instanceCount(resource: ArmResource, template: ArmTemplate): number {
  return resource.copy === undefined ? 1 : Number(evaluate(resource.copy.count, { template }));
}

export interface RoleAssignment {
  module: string;
  /** The role definition's GUID. */
  role: string;
  /** The principalId, type and scope as written (expressions in the declaring template's scope). */
  principalId: unknown;
  principalType: unknown;
  scope: string | undefined;
  condition: unknown;
}

/** Every Microsoft.Authorization/roleAssignments instance (loops expanded) in the template tree. */
export function roleAssignments(template: ArmTemplate): RoleAssignment[] {
  return resourcesOfType(template, 'Microsoft.Authorization/roleAssignments').flatMap(
    ({ module, template: t, resource }) =>
      Array.from({ length: instanceCount(resource, t) }, (_, copyIndex) => {
        const properties = resource.properties as Record<string, unknown>;
        const [type, role] = callArgs(String(properties.roleDefinitionId), 'subscriptionResourceId');
        if (type?.kind !== 'string' || type.value !== 'Microsoft.Authorization/roleDefinitions' || !role) {
          throw new Error(`roleDefinitionId is not a built-in role: ${String(properties.roleDefinitionId)}`);
        }
        return {
          module,
          role: String(evalExpr(role, { template: t, copyIndex })),
          principalId: properties.principalId,
          principalType: properties.principalType,
          scope: resource.scope,
          condition: resource.condition,
        };
      }),
  );
}

/** The parameters an expression reads: "parameters('x')" gives 'x'. */
export function parametersRead(e: Expr): string[] {
  switch (e.kind) {
    case 'call': {
      const [name] = e.args;
      const own = e.name === 'parameters' && name?.kind === 'string' ? [name.value] : [];
      return [...own, ...e.args.flatMap(parametersRead)];
    }
    case 'property':
      return parametersRead(e.target);
    case 'index':
      return [...parametersRead(e.target), ...parametersRead(e.index)];
    default:
      return [];
  }
}

/** The string literals in an expression. */
export function stringLiterals(e: Expr): string[] {
  switch (e.kind) {
    case 'string':
      return [e.value];
    case 'call':
      return e.args.flatMap(stringLiterals);
    case 'property':
      return stringLiterals(e.target);
    case 'index':
      return [...stringLiterals(e.target), ...stringLiterals(e.index)];
    default:
      return [];
  }
}

/** Every object key in a JSON value, depth first. */
export function jsonKeys(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(jsonKeys);
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([k, v]) => [k, ...jsonKeys(v)]);
  }
  return [];
}

/** evaluate() for a parsed node (an argument of a call, say); a missing node is an error. */
export function evaluateNode(e: Expr | undefined, scope: Scope): unknown {
  if (e === undefined) throw new Error('no expression to evaluate');
  return evalExpr(e, scope);
}

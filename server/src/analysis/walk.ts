/**
 * The one pass over the syntax tree. `descendantsOfType` walks the tree inside WASM (far cheaper than a JS-side cursor
 * walk); a sweep over the returned nodes, which come in document order, rebuilds the nesting (class, function, try,
 * with, loop) with a stack of end offsets, so every record knows its context without walking up the tree.
 */
import type { SyntaxNode } from './node';

export interface ClassRec {
  node: SyntaxNode;
  name: string;
  start: number;
  end: number;
  scope: Scope;
  /** Methods and class-body assignments, filled by the sweep. */
  methods: FuncRec[];
  bodyAssigns: AssignRec[];
  decorators: string[];
}

export interface FuncRec {
  node: SyntaxNode;
  name: string;
  start: number;
  end: number;
  /** The class it is a method of (directly in the class body). */
  cls?: ClassRec;
  scope: Scope;
  returns: SyntaxNode[];
  assigns: AssignRec[];
  calls: CallRec[];
}

export interface WithRec {
  node: SyntaxNode;
  id: number;
  start: number;
  end: number;
  /** The name of the innermost function holding the with statement (through classes), from the walk's stack. */
  fnName?: string;
}

/** Where a node sits: innermost class and function, whether inside a try statement, enclosing with blocks and loops. */
export interface Scope {
  cls?: ClassRec;
  fn?: FuncRec;
  guarded: boolean;
  withs: WithRec[];
  loopDepth: number;
}

export interface CallRec {
  node: SyntaxNode;
  start: number;
  scope: Scope;
  /** The last assignment that starts before this call (in the sweep's document order): perhaps its parent. */
  assign?: AssignRec;
  /** The `function` and `arguments` children, once read (calleeOf, argListOf). */
  fn?: SyntaxNode | null;
  args?: SyntaxNode | null;
}

export interface AssignRec {
  node: SyntaxNode;
  start: number;
  scope: Scope;
  /** The `left` and `right` children, once read (leftOf, rightOf). */
  left?: SyntaxNode | null;
  right?: SyntaxNode | null;
}

export interface ImportRec {
  node: SyntaxNode;
  scope: Scope;
}

export interface WalkResult {
  imports: ImportRec[];
  classes: ClassRec[];
  functions: FuncRec[];
  calls: CallRec[];
  assigns: AssignRec[];
  withs: WithRec[];
  /** Module-level assignments (`N_EMBD = 768`, `Linear = nn.Linear`). */
  moduleAssigns: AssignRec[];
}

interface Frame {
  end: number;
  kind: 'class' | 'fn' | 'try' | 'with' | 'loop';
  rec?: ClassRec | FuncRec | WithRec;
}

/** Collects the records the analysis needs in one pass over the WALK_TYPES nodes of the file, in document order. */
export function walkNodes(nodes: readonly SyntaxNode[], src: string): WalkResult {
  const out: WalkResult = { imports: [], classes: [], functions: [], calls: [], assigns: [], withs: [], moduleAssigns: [] };
  const stack: Frame[] = [];
  let scope: Scope = { guarded: false, withs: [], loopDepth: 0 };

  const rebuild = (): void => { scope = scopeOfStack(stack); };
  let lastAssign: AssignRec | undefined;

  for (const node of nodes) {
    const start = node.startIndex;
    let popped = false;
    while (stack.length && stack[stack.length - 1].end <= start) { stack.pop(); popped = true; }
    if (popped) rebuild();
    const type = node.type;
    switch (type) {
      case 'call': {
        const rec: CallRec = { node, start, scope };
        if (lastAssign) rec.assign = lastAssign;
        out.calls.push(rec);
        if (scope.fn) scope.fn.calls.push(rec);
        break;
      }
      case 'assignment': {
        const rec: AssignRec = { node, start, scope };
        lastAssign = rec;
        out.assigns.push(rec);
        if (scope.fn) scope.fn.assigns.push(rec);
        else if (scope.cls) scope.cls.bodyAssigns.push(rec);
        else out.moduleAssigns.push(rec);
        break;
      }
      case 'return_statement':
        if (scope.fn) scope.fn.returns.push(node);
        break;
      case 'import_statement':
      case 'import_from_statement':
        out.imports.push({ node, scope });
        break;
      case 'class_definition': {
        const rec = classRecOf(node, src, scope);
        out.classes.push(rec);
        stack.push({ end: rec.end, kind: 'class', rec });
        rebuild();
        break;
      }
      case 'function_definition': {
        const rec = funcRecOf(node, src, scope);
        if (rec.cls) rec.cls.methods.push(rec);
        out.functions.push(rec);
        stack.push({ end: rec.end, kind: 'fn', rec });
        rebuild();
        break;
      }
      case 'try_statement':
        stack.push({ end: node.endIndex, kind: 'try' });
        rebuild();
        break;
      case 'for_statement':
      case 'while_statement':
        stack.push({ end: node.endIndex, kind: 'loop' });
        rebuild();
        break;
      case 'with_statement': {
        const rec: WithRec = { node, id: out.withs.length, start, end: node.endIndex };
        const fn = enclosingFunction(stack);
        if (fn) rec.fnName = fn.name;
        out.withs.push(rec);
        stack.push({ end: rec.end, kind: 'with', rec });
        rebuild();
        break;
      }
    }
  }
  return out;
}

/** The scope at the top of the frame stack: the innermost class and function, try, withs, loop depth. */
function scopeOfStack(stack: Frame[]): Scope {
  let cls: ClassRec | undefined;
  let fn: FuncRec | undefined;
  let guarded = false;
  const withs: WithRec[] = [];
  let loopDepth = 0;
  for (const f of stack) {
    if (f.kind === 'class') { cls = f.rec as ClassRec; fn = undefined; loopDepth = 0; }
    else if (f.kind === 'fn') { fn = f.rec as FuncRec; loopDepth = 0; }
    else if (f.kind === 'try') guarded = true;
    else if (f.kind === 'with') withs.push(f.rec as WithRec);
    else if (f.kind === 'loop') loopDepth++;
  }
  // A class nested in a function keeps the function as context of its own body only through cls.
  return { cls, fn, guarded, withs, loopDepth };
}

/** A class definition's record, with its decorators' texts. */
function classRecOf(node: SyntaxNode, src: string, scope: Scope): ClassRec {
  const nameNode = node.childForFieldName('name');
  const decorators: string[] = [];
  const parent = node.parent;
  if (parent && parent.type === 'decorated_definition') {
    for (const c of parent.namedChildren) if (c && c.type === 'decorator') decorators.push(src.slice(c.startIndex + 1, c.endIndex).trim());
  }
  return {
    node, name: nameNode ? src.slice(nameNode.startIndex, nameNode.endIndex) : '', start: node.startIndex, end: node.endIndex,
    scope, methods: [], bodyAssigns: [], decorators,
  };
}

/** A function definition's record: a method of the enclosing class when defined directly in its body. */
function funcRecOf(node: SyntaxNode, src: string, scope: Scope): FuncRec {
  const nameNode = node.childForFieldName('name');
  return {
    node, name: nameNode ? src.slice(nameNode.startIndex, nameNode.endIndex) : '', start: node.startIndex, end: node.endIndex,
    cls: scope.fn ? undefined : scope.cls, scope, returns: [], assigns: [], calls: [],
  };
}

/** The innermost function on the frame stack. */
function enclosingFunction(stack: Frame[]): FuncRec | undefined {
  for (let i = stack.length - 1; i >= 0; i--) {
    const f = stack[i];
    if (f.kind === 'fn') return f.rec as FuncRec;
  }
  return undefined;
}

/*
 * The children that many passes read of the same assignment or call (its sides; a call's function and arguments), read
 * from the tree once per analysis and kept on the record: on the CLI path each read is a call into WASM that makes a
 * new node object.
 */

export function leftOf(a: AssignRec): SyntaxNode | null {
  if (a.left === undefined) a.left = a.node.childForFieldName('left');
  return a.left;
}

export function rightOf(a: AssignRec): SyntaxNode | null {
  if (a.right === undefined) a.right = a.node.childForFieldName('right');
  return a.right;
}

export function calleeOf(c: CallRec): SyntaxNode | null {
  if (c.fn === undefined) c.fn = c.node.childForFieldName('function');
  return c.fn;
}

export function argListOf(c: CallRec): SyntaxNode | null {
  if (c.args === undefined) c.args = c.node.childForFieldName('arguments');
  return c.args;
}

/**
 * The assignment whose right side is this call (`self.fc = nn.Linear(...)`), when it is: its parent, known without
 * reading the call's parent from the tree. In document order the assignment is the last one that starts before the call.
 */
export function assignedBy(c: CallRec): AssignRec | undefined {
  const a = c.assign;
  if (!a) return undefined;
  const r = rightOf(a);
  return r && r.startIndex === c.start && r.type === 'call' && r.endIndex === c.node.endIndex ? a : undefined;
}

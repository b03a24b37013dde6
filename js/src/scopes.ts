/**
 * What the graph makes of a step's scopes and statements: which module scopes a big step opens
 * collapsed, what a collapsed scope says about itself, and where `del` statements are noted.
 *
 * Layer: front-end core, pure (no DOM); imports the schema types only.
 *
 * Note [Opening big graphs]: a step that would draw more than BIG_GRAPH nodes (a 12-layer
 * decoder's forward has 534) opens with its module scopes collapsed at one depth of the module
 * tree, the deepest at which at most READABLE nodes and boxes are drawn: for GPT-2,
 * `transformer.h.0` ... `transformer.h.11` as boxes (30 items; one level deeper, attn and mlp,
 * would be 90). Step inputs are not counted: those used inside one box are drawn inside it.
 * The user's own collapse and expand choices override this default.
 */
import type { Group, Step, TraceNode } from "./schema";

/** Above this many nodes a step opens with module scopes collapsed. */
export const BIG_GRAPH = 150;
/** At most this many nodes and boxes when it does (about a screenful). */
export const READABLE = 50;
const MAX_DEPTH = 32;

/** `del` statements free values: the graph notes them on a node instead of drawing them. */
export function isDel(node: Pick<TraceNode, "op">): boolean {
  return node.op === "del" || node.op === "prims.python_del";
}

/** A statement of the trace: drawn as a node (fusion members are not statements). */
function isStatement(node: TraceNode): boolean {
  return node.fused_into === null && !isDel(node);
}

/** Each group's ancestors, innermost first (itself included); cycles and depth are bounded. */
export function groupChains(step: Step): Map<string, Group[]> {
  const byId = new Map(step.groups.map((g) => [g.id, g]));
  const chains = new Map<string, Group[]>();
  for (const g of step.groups) {
    const chain: Group[] = [];
    const seen = new Set<string>();
    for (let cur: Group | undefined = g; cur && !seen.has(cur.id) && chain.length < MAX_DEPTH;) {
      seen.add(cur.id);
      chain.push(cur);
      cur = cur.parent === null ? undefined : byId.get(cur.parent);
    }
    chains.set(g.id, chain);
  }
  return chains;
}

/** The module groups to collapse when a step opens (Note [Opening big graphs]). */
export function defaultCollapsed(step: Step): Set<string> {
  const chains = groupChains(step);
  const depth = new Map<string, number>();
  for (const g of step.groups) {
    if (g.kind === "module") depth.set(g.id, (chains.get(g.id) as Group[]).length - 1);
  }
  if (!depth.size || visibleItems(step, chains, () => false) <= BIG_GRAPH) return new Set();
  const deepest = Math.max(...depth.values());
  let chosen = 0;
  for (let d = 1; d <= deepest; d++) {
    if (visibleItems(step, chains, (g) => depth.get(g.id) === d) > READABLE) break;
    chosen = d;
  }
  return new Set([...depth].filter(([, d]) => d === chosen).map(([id]) => id));
}

/** How many nodes and boxes the graph draws when the groups `collapsed` says are collapsed. */
function visibleItems(
  step: Step,
  chains: Map<string, Group[]>,
  collapsed: (g: Group) => boolean,
): number {
  const shown = new Set<string>();
  for (const n of step.nodes) {
    if (!isStatement(n)) continue;
    const chain = n.group === null ? [] : (chains.get(n.group) ?? []);
    let outermost: Group | undefined;
    for (const g of chain) if (collapsed(g)) outermost = g;
    shown.add(outermost ? `group:${outermost.id}` : n.id);
  }
  return shown.size;
}

export interface ScopeStats {
  /** Statements inside the group and its subgroups. */
  ops: number;
  /** The executors those run on, most used first. */
  executors: string[];
  /** Their measured time per call (a profile's), when the step was profiled. */
  ms: number | null;
}

/** What a collapsed group's box says: its op count, executors and (profiled) time. */
export function scopeStats(
  step: Step,
  chains: Map<string, Group[]>,
  costs: Map<string, { ms: number }> | null = null,
): Map<string, ScopeStats> {
  const counts = new Map<string, Map<string, number>>();
  const ops = new Map<string, number>();
  const ms = new Map<string, number>();
  for (const n of step.nodes) {
    if (!isStatement(n) || n.group === null) continue;
    const cost = costs?.get(n.id)?.ms ?? 0;
    for (const g of chains.get(n.group) ?? []) {
      ops.set(g.id, (ops.get(g.id) ?? 0) + 1);
      ms.set(g.id, (ms.get(g.id) ?? 0) + cost);
      if (n.executor === null) continue;
      const byExecutor = counts.get(g.id) ?? new Map<string, number>();
      byExecutor.set(n.executor, (byExecutor.get(n.executor) ?? 0) + 1);
      counts.set(g.id, byExecutor);
    }
  }
  const stats = new Map<string, ScopeStats>();
  for (const [id, n] of ops) {
    const byExecutor = [...(counts.get(id) ?? new Map<string, number>())];
    byExecutor.sort((a, b) => b[1] - a[1]);
    stats.set(id, {
      ops: n,
      executors: byExecutor.map(([e]) => e),
      ms: costs ? (ms.get(id) ?? 0) : null,
    });
  }
  return stats;
}

/** The `del` statements noted on one node: the values they free, and their own ids. */
export interface DelNote {
  names: string[];
  dels: string[];
}

/**
 * Where each `del` statement is noted: on the last statement before it that reads or writes
 * a value it frees (else the statement just before it).
 */
export function delNotes(step: Step): Map<string, DelNote> {
  const notes = new Map<string, DelNote>();
  const lastUse = new Map<string, string>();
  let previous: string | undefined;
  for (const n of step.nodes) {
    if (n.fused_into !== null) continue;
    if (isDel(n)) {
      for (const v of n.inputs) {
        const at = lastUse.get(v.name) ?? previous;
        if (at === undefined) continue;
        const note = notes.get(at) ?? { names: [], dels: [] };
        note.names.push(v.name);
        if (!note.dels.includes(n.id)) note.dels.push(n.id);
        notes.set(at, note);
      }
      continue;
    }
    for (const v of n.inputs) lastUse.set(v.name, n.id);
    for (const v of n.outputs) lastUse.set(v.name, n.id);
    previous = n.id;
  }
  return notes;
}

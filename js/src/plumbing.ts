/**
 * Plumbing: what a trace does that is not computation, folded away by default.
 *
 * A library's own bookkeeping reaches the trace as attribute stores on its objects (Hugging Face
 * transformers' output collector: `_active_collector` passed in, `store_attr(_active_collector,
 * 'compiling', True)` around every forward). They must run (they are side effects), but they
 * are not what the user is looking for, and on GPT-2 they sit at the top of every graph with
 * edges across it. A step without them is the same step less those nodes, the opaque inputs only
 * they read, and the edges and diff entries that touch them; the trace source keeps every line.
 *
 * Layer: front-end core; imports the schema's types only.
 */
import type { Step, TraceDocument, TraceNode } from "./schema";

/** An attribute store that makes no value: bookkeeping, not computation. */
export function isPlumbing(node: TraceNode): boolean {
  return node.outputs.length === 0 && node.label.replace(/^prims\./, "") === "store_attr";
}

/** The ids (nodes, and `input:<name>` of inputs only plumbing reads) a step hides. */
export function plumbingIds(step: Step): Set<string> {
  const hidden = new Set(step.nodes.filter(isPlumbing).map((n) => n.id));
  if (!hidden.size) return hidden;
  const readers = new Map<string, string[]>();
  for (const e of [...step.edges, ...step.inner_edges]) {
    if (!e.source.startsWith("input:")) continue;
    readers.set(e.source, [...(readers.get(e.source) ?? []), e.target]);
  }
  for (const v of step.inputs) {
    const id = `input:${v.name}`;
    const read = readers.get(id) ?? [];
    if (v.kind !== "tensor" && read.length && read.every((t) => hidden.has(t))) hidden.add(id);
  }
  return hidden;
}

/** How many distinct plumbing nodes the document has (a node keeps its id from step to step). */
export function plumbingCount(doc: TraceDocument): number {
  const ids = new Set<string>();
  for (const step of doc.steps)
    for (const node of step.nodes) if (isPlumbing(node)) ids.add(node.id);
  return ids.size;
}

/** The document with each step's plumbing taken out (the same object when it has none). */
export function withoutPlumbing(doc: TraceDocument): TraceDocument {
  if (!plumbingCount(doc)) return doc;
  // node ids are stable across steps: a diff's `removed` names the previous step's nodes
  const everywhere = new Set<string>();
  for (const step of doc.steps) for (const n of step.nodes) if (isPlumbing(n)) everywhere.add(n.id);
  return { ...doc, steps: doc.steps.map((s) => stepWithoutPlumbing(s, everywhere)) };
}

function stepWithoutPlumbing(step: Step, everywhere: Set<string>): Step {
  const hidden = plumbingIds(step);
  if (!hidden.size && !step.diff?.removed.some((id) => everywhere.has(id))) return step;
  const keep = (id: string): boolean => !hidden.has(id) && !everywhere.has(id);
  const diff = step.diff && {
    ...step.diff,
    added: step.diff.added.filter(keep),
    removed: step.diff.removed.filter(keep),
    rewritten: step.diff.rewritten.filter(keep),
  };
  const parents = new Set(step.groups.map((g) => g.parent));
  const groups = step.groups
    .map((g) => ({ ...g, nodes: g.nodes.filter(keep) }))
    .filter((g, i) => g.nodes.length || !step.groups[i]!.nodes.length || parents.has(g.id));
  return {
    ...step,
    nodes: step.nodes.filter((n) => keep(n.id)),
    edges: step.edges.filter((e) => keep(e.source) && keep(e.target)),
    inner_edges: step.inner_edges.filter((e) => keep(e.source) && keep(e.target)),
    groups,
    inputs: step.inputs.filter((v) => keep(`input:${v.name}`)),
    diff,
  };
}

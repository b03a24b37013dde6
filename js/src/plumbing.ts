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
 * Layer: front-end core; imports the schema and lazy.ts.
 */
import { isLoaded, withLazyFields } from "./lazy";
import { STEP_BODY, type Step, type TraceDocument, type TraceNode } from "./schema";

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

/**
 * How many distinct plumbing nodes the document's read steps hold (a node keeps its id from step
 * to step); a step not read yet (Note [Lazy steps] in schema.ts) counts once it is.
 */
export function plumbingCount(doc: TraceDocument): number {
  const ids = new Set<string>();
  for (const step of doc.steps) {
    if (!isLoaded(step, "nodes")) continue;
    for (const node of step.nodes) if (isPlumbing(node)) ids.add(node.id);
  }
  return ids.size;
}

/** The document with each step's plumbing taken out, step by step on first use. */
export function withoutPlumbing(doc: TraceDocument): TraceDocument {
  const steps = doc.steps.map((step, i) => {
    const head: Record<string, unknown> = {};
    for (const k of Object.keys(step)) {
      if (!(STEP_BODY as readonly string[]).includes(k)) head[k] = step[k as keyof Step];
    }
    return withLazyFields(head as unknown as Step, STEP_BODY, () => ({
      ...stepWithoutPlumbing(step, previousOfKind(doc.steps, i)),
    }));
  });
  return { ...doc, steps };
}

/** The step a step's diff compares it with: the one its diff names, else the last of its kind. */
function previousOfKind(steps: Step[], index: number): Step | undefined {
  const step = steps[index] as Step;
  const named = step.diff && steps.find((s) => s.id === step.diff?.previous);
  if (named) return named;
  for (let j = index - 1; j >= 0; j--) if (steps[j]?.kind === step.kind) return steps[j];
  return undefined;
}

function stepWithoutPlumbing(step: Step, previous: Step | undefined): Step {
  const hidden = plumbingIds(step);
  // node ids are stable across steps: a diff's `removed` names the previous step's nodes
  const before = new Set(previous?.nodes.filter(isPlumbing).map((n) => n.id));
  if (!hidden.size && !step.diff?.removed.some((id) => before.has(id))) return step;
  const keep = (id: string): boolean => !hidden.has(id) && !before.has(id);
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

/**
 * Collectives (thunder.distributed: `dist_all_reduce`, `dist_all_gather`, `dist_reduce_scatter`,
 * each finished by a `dist_wait`) and what runs while they are in flight: a collective is issued,
 * the statements after it run, and its wait blocks until the data arrived. The compute between
 * the two is what hides the communication.
 *
 * Layer: front-end core, pure (no DOM); imports the schema types only.
 */
import type { Step, TraceNode } from "./schema";

/** How the graph draws a distributed op: a collective, its wait, or the packing around them. */
export type CommKind = "collective" | "wait" | "comm";

const COLLECTIVES = new Set(["all_reduce", "all_gather", "reduce_scatter"]);
const HELPERS = new Set([
  "pack_bucket",
  "unpack_bucket",
  "pack_shards",
  "unpack_gathered",
  "pack_gathered_grads",
  "synchronize",
  "gradient_ready",
]);

/** The op's name in thunder.distributed (`dist_all_gather` and `dist.all_gather` alike), or null. */
function distName(op: string): string | null {
  const m = /^dist[._](.+)$/.exec(op);
  return m ? (m[1] as string) : null;
}

export function commKind(node: Pick<TraceNode, "op">): CommKind | null {
  const name = distName(node.op);
  if (name === null) return null;
  if (COLLECTIVES.has(name)) return "collective";
  if (name === "wait") return "wait";
  return HELPERS.has(name) ? "comm" : null;
}

/** A collective, the wait that finishes it (null when the step has none) and the compute between. */
export interface Overlap {
  collective: string;
  wait: string | null;
  /** Statements that run while it is in flight, other than distributed ops, `del` and comments. */
  compute: string[];
}

function isCompute(n: TraceNode): boolean {
  return (
    commKind(n) === null &&
    n.op !== "del" &&
    n.op !== "prims.python_del" &&
    n.op !== "prims.comment" &&
    n.op !== "comment" &&
    n.op !== "prims.python_return" &&
    n.op !== "return"
  );
}

/**
 * Each collective of the step and its wait (the statement reading the collective's result), both
 * keys of the map, with the compute between them in the trace's order.
 */
export function overlaps(step: Step): Map<string, Overlap> {
  const statements = step.nodes.filter((n) => n.fused_into === null);
  const out = new Map<string, Overlap>();
  statements.forEach((n, i) => {
    if (commKind(n) !== "collective") return;
    const results = new Set(n.outputs.map((v) => v.name));
    let j = i + 1;
    while (
      j < statements.length &&
      !(
        commKind(statements[j] as TraceNode) === "wait" &&
        (statements[j] as TraceNode).inputs.some((v) => results.has(v.name))
      )
    )
      j++;
    const wait = j < statements.length ? (statements[j] as TraceNode).id : null;
    const compute = statements
      .slice(i + 1, j)
      .filter(isCompute)
      .map((m) => m.id);
    const overlap = { collective: n.id, wait, compute };
    out.set(n.id, overlap);
    if (wait !== null) out.set(wait, overlap);
  });
  return out;
}

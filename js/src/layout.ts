/**
 * Layered graph layout that follows trace order and stays stable from step to step.
 *
 * Layer: front-end core, pure (no DOM), so it runs both in the layout Web Worker and on the main
 * thread. Imports nothing.
 *
 * Note [Stable layout]: cells (layer, column) are remembered by node id across the steps of one
 * kind of a document (its prologue, forward or backward steps: they share no nodes), laid out in
 * document order. A node whose id was laid out before keeps its cell, so a
 * node that survives a pass does not move. A new node goes one layer below its lowest producer,
 * in the free column nearest to the column of what it was made from (its lineage, e.g. the ops a
 * fusion absorbed, whose cells the pass freed) or else of its leftmost producer; so chains of
 * ops stand in one column (a residual network's trunk too) and a fusion appears where its first
 * member was. Survivors are placed
 * before new nodes, so a new node early in trace order cannot take a survivor's cell. Because the result only
 * depends on the steps of its kind before it, it is the same whichever order the user walks the
 * steps in.
 *
 * Note [Sources beside their use]: step inputs (a model's parameters) and nodes that read only
 * step inputs (constants, a weight's transpose) would all stand on the top rows, with edges
 * across the whole graph. They are placed last instead, one layer above their first consumer
 * (the one nearest the top) and in the free column nearest to it, so a layer norm's weight and
 * bias stand right above it. An input keeps its cell from the step before only if that is still
 * right above its first consumer (a backward step's inputs are not where the forward had them).
 * A source that nothing drawn reads (a batch norm's `num_batches_tracked += 1`, an update of a
 * buffer) has no consumer to stand above: it stands one layer below the node before it in trace
 * order (beside the batch norm that follows it), inside its module's box, where the top row put each of a ResNet's twenty
 * such updates and stretched every module's box over the whole graph.
 */

/** What the layout needs of one step (small, so it is cheap to post to the worker). */
export interface LayoutStepInput {
  /** Pseudo-node ids of the step inputs, `input:<name>`. */
  inputs: string[];
  /** Nodes in trace order; a fusion member names its fusion node in `fusedInto`. */
  nodes: { id: string; lineage: string[]; fusedInto?: string | null }[];
  /** `[source, target]` ids; sources may be `input:<name>`, targets may be `output`. */
  edges: [string, string][];
}

/** Cells of every laid-out id of a step (`layer[i]`, `col[i]` belong to `ids[i]`). */
export interface StepLayout {
  ids: string[];
  layer: Int32Array;
  col: Int32Array;
}

export const OUTPUT_ID = "output";

/**
 * Note [Rows that wrap]: a new node goes on the first layer at or below the one its producers ask
 * for that holds fewer than ROW_WIDTH nodes. A prologue checks hundreds of values unpacked from
 * one input (a BERT's: 1,225 checks), all one layer below it: one row 43,000 px wide, whose
 * nodes the screen showed a few of at a time, in no order. Wrapped, they read top to bottom as
 * the trace does; a node still stands below what it reads (only lower, never higher).
 */
export const ROW_WIDTH = 12;

interface Cell {
  layer: number;
  col: number;
}

export class LayoutEngine {
  private readonly memory = new Map<string, Cell>();

  /** Lays out the next step; call in document order. */
  layoutStep(step: LayoutStepInput): StepLayout {
    const occupied = new Map<number, Set<number>>();
    const placed = new Map<string, Cell>();
    const ids: string[] = [];

    const isFree = (c: Cell): boolean => !occupied.get(c.layer)?.has(c.col);
    const place = (id: string, c: Cell): void => {
      let cols = occupied.get(c.layer);
      if (!cols) occupied.set(c.layer, (cols = new Set()));
      cols.add(c.col);
      placed.set(id, c);
      ids.push(id);
    };
    // A new node's layer, or the first below it with room (Note [Rows that wrap]).
    const roomyLayer = (layer: number): number => {
      while ((occupied.get(layer)?.size ?? 0) >= ROW_WIDTH) layer++;
      return layer;
    };
    const nearestFree = (layer: number, hint: number): Cell => {
      const cols = occupied.get(layer);
      if (!cols || !cols.has(hint)) return { layer, col: hint };
      for (let d = 1; ; d++) {
        if (!cols.has(hint + d)) return { layer, col: hint + d };
        if (hint - d >= 0 && !cols.has(hint - d)) return { layer, col: hint - d };
      }
    };

    // A fusion node with members stands where its first member is (it is drawn only while its
    // members are hidden), so it shares that cell instead of taking one of its own.
    const fusionIds = new Set<string>();
    for (const node of step.nodes) if (node.fusedInto) fusionIds.add(node.fusedInto);
    const producers = new Map<string, string[]>();
    const consumers = new Map<string, string[]>(); // of a fusion: its members, not itself
    for (const [source, target] of step.edges) {
      push(producers, target, source);
      if (!fusionIds.has(target)) push(consumers, source, target);
    }
    const inputs = new Set(step.inputs);
    // Nodes that read only step inputs go beside their use (Note [Sources beside their use]).
    const isSource = (id: string): boolean =>
      !inputs.has(id) && (producers.get(id) ?? []).every((p) => inputs.has(p));

    const placeMember = (node: LayoutStepInput["nodes"][number], cell: Cell): void => {
      place(node.id, cell);
      const fusion = node.fusedInto;
      if (fusion && !placed.has(fusion)) {
        placed.set(fusion, cell);
        ids.push(fusion);
      }
    };

    // Survivors first, so a new node placed earlier in trace order cannot take their cells.
    const fresh: LayoutStepInput["nodes"] = [];
    const freshSources: LayoutStepInput["nodes"] = [];
    const seen = new Set<string>(step.inputs);
    for (const node of step.nodes) {
      if (seen.has(node.id)) continue; // a malformed document may repeat an id: lay it out once
      seen.add(node.id);
      if (fusionIds.has(node.id)) continue;
      const remembered = this.memory.get(node.id);
      if (remembered && isFree(remembered)) placeMember(node, remembered);
      else (isSource(node.id) ? freshSources : fresh).push(node);
    }
    // A source not placed yet stands on layer 1 at the highest, so its consumers go below that.
    const layerOf = (id: string): number | undefined =>
      placed.get(id)?.layer ?? (isSource(id) && seen.has(id) ? 1 : undefined);
    for (const node of fresh) {
      const sources = producers.get(node.id);
      placeMember(
        node,
        this.cellFor(node.lineage, sources, placed, layerOf, isFree, (layer, hint) =>
          nearestFree(roomyLayer(layer), hint),
        ),
      );
    }
    const above = (lineage: string[], id: string, minLayer: number, fallbackCol: number): Cell =>
      this.sourceCell(
        lineage,
        consumers.get(id),
        minLayer,
        fallbackCol,
        placed,
        isFree,
        nearestFree,
      );
    const order = new Map(step.nodes.map((n, i) => [n.id, i]));
    // The cell of the nearest node before `id` in trace order, if any is placed (a member: its own).
    const previous = (id: string): Cell | undefined => {
      for (let i = (order.get(id) ?? 0) - 1; i >= 0; i--) {
        const c = placed.get(step.nodes[i]!.id);
        if (c) return c;
      }
      return undefined;
    };
    for (const node of freshSources) {
      const read = consumers.get(node.id)?.some((t) => placed.has(t));
      const before = read ? undefined : previous(node.id);
      placeMember(
        node,
        before ? nearestFree(before.layer + 1, before.col + 1) : above(node.lineage, node.id, 1, 0),
      );
    }
    step.inputs.forEach((id, i) => {
      if (!placed.has(id)) place(id, above([id], id, 0, i)); // a malformed document may repeat one
    });
    let maxLayer = 0;
    for (const c of placed.values()) if (c.layer > maxLayer) maxLayer = c.layer;

    const remembered = this.memory.get(OUTPUT_ID);
    const firstProducer = producers
      .get(OUTPUT_ID)
      ?.map((p) => placed.get(p))
      .find((c) => c);
    const outLayer = Math.max(remembered?.layer ?? 0, maxLayer + 1);
    place(OUTPUT_ID, nearestFree(outLayer, firstProducer?.col ?? remembered?.col ?? 0));

    const layer = new Int32Array(ids.length);
    const col = new Int32Array(ids.length);
    ids.forEach((id, i) => {
      const c = placed.get(id) as Cell;
      layer[i] = c.layer;
      col[i] = c.col;
      this.memory.set(id, c);
    });
    return { ids, layer, col };
  }

  /** The cell of a node laid out for the first time (see Note [Stable layout]). */
  private cellFor(
    lineage: string[],
    sources: string[] | undefined,
    placed: Map<string, Cell>,
    layerOf: (id: string) => number | undefined,
    isFree: (c: Cell) => boolean,
    nearestFree: (layer: number, hint: number) => Cell,
  ): Cell {
    let desired = 1;
    let hint: number | undefined;
    for (const s of sources ?? []) {
      const layer = layerOf(s);
      if (layer === undefined) continue;
      if (layer + 1 > desired) desired = layer + 1;
      const col = placed.get(s)?.col;
      if (col !== undefined && (hint === undefined || col < hint)) hint = col;
    }
    for (const ancestor of lineage) {
      const c = this.memory.get(ancestor);
      if (!c) continue;
      if (c.layer >= desired && isFree(c)) return c;
      hint = c.col;
      break;
    }
    return nearestFree(desired, hint ?? 0);
  }

  /** The cell of a new source or input: above its first consumer (Note [Sources beside their use]). */
  private sourceCell(
    lineage: string[],
    targets: string[] | undefined,
    minLayer: number,
    fallbackCol: number,
    placed: Map<string, Cell>,
    isFree: (c: Cell) => boolean,
    nearestFree: (layer: number, hint: number) => Cell,
  ): Cell {
    let first: Cell | undefined;
    for (const t of targets ?? []) {
      const c = placed.get(t);
      if (c && (!first || c.layer < first.layer)) first = c;
    }
    const layer = first ? Math.max(minLayer, first.layer - 1) : minLayer;
    let hint = first?.col ?? fallbackCol;
    // Where it (an input: `lineage` is its own id) or what it was made from stood, if that is
    // still right above its first consumer.
    for (const ancestor of lineage) {
      const c = this.memory.get(ancestor);
      if (!c) continue;
      if (c.layer >= Math.max(minLayer, layer - 1) && c.layer <= layer && isFree(c)) return c;
      hint = c.col;
      break;
    }
    return nearestFree(layer, hint);
  }
}

function push(map: Map<string, string[]>, key: string, value: string): void {
  const list = map.get(key);
  if (list) list.push(value);
  else map.set(key, [value]);
}

/** Lays out steps one after the other, remembering cells (see Note [Stable layout]). */
export function layoutSteps(steps: LayoutStepInput[]): StepLayout[] {
  const engine = new LayoutEngine();
  return steps.map((s) => engine.layoutStep(s));
}

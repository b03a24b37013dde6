/**
 * Where layouts come from: each step is laid out on first use, on the calling thread, after the
 * earlier steps of its kind (Note [Stable layout] in layout.ts).
 *
 * Layer: front-end core; imports the pure layout, the schema's types and scopes.ts. A layout
 * costs a few milliseconds per thousand nodes (about 4 ms for a 12-layer GPT-2's 500-node
 * forward step), less than starting a Web Worker and posting every step to it; and laying out
 * only what is shown keeps the steps' bodies unread until then (Note [Lazy steps] in schema.ts).
 * Steps of different kinds share no nodes, so a step's cells depend on the earlier steps of its
 * kind only, and showing the backward step first does not lay out the forward steps.
 */
import { LayoutEngine, type LayoutStepInput, type StepLayout } from "./layout";
import type { Step, StepKind } from "./schema";
import { isDel } from "./scopes";

/** The layout's view of a step. */
export function layoutInput(step: Step): LayoutStepInput {
  return {
    inputs: step.inputs.map((v) => `input:${v.name}`),
    nodes: step.nodes
      .filter((n) => !isDel(n)) // the graph notes it on a node instead (scopes.ts)
      .map((n) => ({ id: n.id, lineage: n.lineage, fusedInto: n.fused_into })),
    edges: [...step.edges, ...step.inner_edges].map((e) => [e.source, e.target]),
  };
}

export class StepLayouts {
  private readonly engines = new Map<StepKind, LayoutEngine>();
  private readonly done = new Map<number, StepLayout>();

  constructor(private readonly steps: readonly Step[]) {}

  /** Whether step `index` is laid out already (costs nothing). */
  has(index: number): boolean {
    return this.done.has(index);
  }

  /** Step `index`'s cells, laying out it and the earlier steps of its kind not yet laid out. */
  get(index: number): StepLayout {
    const known = this.done.get(index);
    if (known) return known;
    const step = this.steps[index];
    if (!step) throw new RangeError(`no step ${index} to lay out`);
    let engine = this.engines.get(step.kind);
    if (!engine) {
      engine = new LayoutEngine();
      this.engines.set(step.kind, engine);
    }
    for (let i = 0; i <= index; i++) {
      const s = this.steps[i] as Step;
      if (s.kind === step.kind && !this.done.has(i)) {
        this.done.set(i, engine.layoutStep(layoutInput(s)));
      }
    }
    return this.done.get(index) as StepLayout;
  }
}

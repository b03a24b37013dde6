/**
 * How the steps of one document relate: a step's previous step of its kind (what its diff and
 * lineage point into), the forward step a backward node's origin names, the gradient ops of a
 * forward node; and the list of steps shown on the left.
 *
 * Layer: front-end core; imports the schema types, lazy.ts and the safe DOM helpers.
 */
import { counted, formatMs, h, truncate } from "./dom";
import { isLoaded } from "./lazy";
import type { Step, TraceDocument, TraceNode } from "./schema";

export class StepRelations {
  /** Node id -> index of the last computation step holding it (built on demand). */
  private lastForward: Map<string, number> | null = null;

  constructor(private readonly steps: Step[]) {}

  previous(step: Step): Step | undefined {
    const steps = this.steps;
    if (step.diff) {
      const byId = steps.find((s) => s.id === step.diff?.previous);
      if (byId) return byId;
    }
    const i = steps.indexOf(step);
    for (let j = i - 1; j >= 0; j--) if (steps[j]?.kind === step.kind) return steps[j];
    return undefined;
  }

  firstOfKind(step: Step): Step | undefined {
    return this.steps.find((s) => s.kind === step.kind);
  }

  /** The last computation step holding a forward node (what a backward node's origin names). */
  forward(id: string): Step | undefined {
    const steps = this.steps;
    if (!this.lastForward) {
      this.lastForward = new Map();
      steps.forEach((s, i) => {
        if (s.kind === "computation") for (const n of s.nodes) this.lastForward?.set(n.id, i);
      });
    }
    const i = this.lastForward.get(id);
    return i === undefined ? undefined : steps[i];
  }

  lastBackward(): Step | undefined {
    const steps = this.steps;
    for (let i = steps.length - 1; i >= 0; i--) if (steps[i]?.kind === "backward") return steps[i];
    return undefined;
  }
}

/**
 * The nodes of a backward step computing the gradient of forward node `id` of step `forward`:
 * those whose origin names it or, for a fusion node, one of its members.
 */
export function gradientNodes(backward: Step, forward: Step, id: string): TraceNode[] {
  const ids = new Set([id]);
  for (const n of forward.nodes) if (n.fused_into === id) ids.add(n.id);
  return backward.nodes.filter((n) => n.origin.some((o) => ids.has(o)));
}

/** Statements of the trace (fusion members are not statements). */
export function opCount(step: Step): number {
  let n = 0;
  for (const node of step.nodes) if (node.fused_into === null) n++;
  return n;
}

/**
 * The list of steps: index, pass, kind, ops, time and what the pass changed; a failed
 * compilation's stage last. A step not read yet (Note [Lazy steps] in schema.ts) shows its ops
 * and changes once it is (`fillStepItem`).
 */
export function stepListItems(doc: Document, model: TraceDocument): HTMLElement[] {
  const items = model.steps.map((st, i) => {
    const li = h(
      doc,
      "li",
      {
        class: `tx-step kind-${st.kind}`,
        "data-testid": "step",
        "data-step-index": i,
        role: "option",
        tabindex: -1,
        "aria-selected": "false",
      },
      h(doc, "span", { class: "tx-step-index" }, String(i)),
      h(
        doc,
        "span",
        { class: "tx-step-text" },
        h(doc, "span", { class: "tx-step-pass" }, truncate(st.pass, 40)),
        h(doc, "span", { class: "tx-step-meta" }),
        h(doc, "span", { class: "tx-step-diff" }),
      ),
    );
    fillStepItem(li, st);
    return li;
  });
  if (model.autograd) {
    // the backward is torch's autograd's: no backward step to show, and why
    items.push(
      h(
        doc,
        "li",
        {
          class: "tx-step tx-step-note",
          "aria-disabled": "true",
          "data-testid": "autograd-note",
          title: model.autograd,
        },
        h(doc, "span", { class: "tx-step-index" }, "∇"),
        h(
          doc,
          "span",
          { class: "tx-step-text" },
          h(doc, "span", { class: "tx-step-pass" }, "backward: torch's autograd"),
          h(doc, "span", { class: "tx-step-meta" }, truncate(model.autograd, 120)),
        ),
      ),
    );
  }
  if (model.error) {
    items.push(
      h(
        doc,
        "li",
        { class: "tx-step tx-step-failed", "aria-disabled": "true" },
        h(doc, "span", { class: "tx-step-index" }, "✕"),
        h(doc, "span", { class: "tx-step-text" }, `failed while ${model.error.stage}`),
      ),
    );
  }
  return items;
}

/** Writes a step's kind, time and, once it is read, its ops and changes into its list item. */
export function fillStepItem(li: Element, st: Step): void {
  const meta = li.querySelector(".tx-step-meta");
  const diff = li.querySelector<HTMLElement>(".tx-step-diff");
  if (!meta || !diff) return;
  const read = isLoaded(st, "nodes");
  meta.textContent = read ? stepMeta(st) : `${st.kind} · ${formatMs(st.ms)}`;
  const d = read ? st.diff : null;
  diff.textContent = d
    ? `+${d.added.length} −${d.removed.length} ~${d.rewritten.length}${Object.keys(d.fused).length ? ` ⊕${Object.keys(d.fused).length}` : ""}`
    : "";
  diff.hidden = !diff.textContent;
}

/** A read step's kind, ops and time (or that it cannot be read). */
export function stepMeta(st: Step): string {
  const ops = st.problems?.length ? "cannot be read" : counted(opCount(st), "op");
  return `${st.kind} · ${ops} · ${formatMs(st.ms)}`;
}

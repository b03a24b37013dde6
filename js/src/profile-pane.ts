/**
 * The explorer's profile wiring (the views are profile-view.ts): the panel of the costliest nodes
 * beside the graph, the saved-for-backward timeline under it, the shown step's profile that the
 * graph and the node details read, and the step a profiled document opens on.
 *
 * Layer: front-end core; imports the schema types, dom.ts and profile-view.ts.
 */
import { h } from "./dom";
import { profilePanel, savedTimelineChart, stepProfile, type StepProfile } from "./profile-view";
import type { Step, TraceDocument, TraceNode } from "./schema";

export class ProfilePane {
  /** Beside the graph: the costliest nodes and the modules beside eager's. */
  readonly panel: HTMLElement;
  /** Under the graph: the bytes saved for backward still read (a backward step). */
  readonly saved: HTMLElement;
  /** The shown step's profile, when the document has one for it. */
  current: StepProfile | null = null;

  constructor(
    private readonly doc: Document,
    private readonly onSelect: (nodeId: string) => void,
  ) {
    this.panel = h(doc, "div", { class: "tx-profile-slot" });
    this.saved = h(doc, "div", { class: "tx-saved-slot" });
    this.panel.addEventListener("click", (e) => {
      const b = (e.target as Element | null)?.closest?.("[data-testid='profile-node']");
      const id = b?.getAttribute("data-node-id");
      if (id) this.onSelect(id);
    });
  }

  /** Reads `step`'s costs from the document's profile; call before drawing the step. */
  setStep(model: TraceDocument | null, step: Step): StepProfile | null {
    this.current = stepProfile(model?.profile ?? null, step);
    return this.current;
  }

  /** Shows the panel and timeline of the step `setStep` was given. */
  render(model: TraceDocument | null, step: Step | undefined, nodes: Map<string, TraceNode>): void {
    const profile = model?.profile ?? null;
    const panel = profilePanel(this.doc, this.current, profile, step, nodes);
    this.panel.replaceChildren(...(panel ? [panel] : []));
    const chart = savedTimelineChart(this.doc, profile?.saved ?? null, step, this.onSelect);
    this.saved.replaceChildren(...(chart ? [chart] : []));
  }

  clear(): void {
    this.current = null;
    this.panel.replaceChildren();
    this.saved.replaceChildren();
  }
}

/** The forward step a profile measured (a profiled document opens on it), or -1. */
export function profiledStep(model: TraceDocument): number {
  const profile = model.profile;
  if (!profile) return -1;
  return model.steps.findIndex((s) => s.kind === "computation" && s.id in profile.steps);
}

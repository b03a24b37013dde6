/**
 * The explorer core: `mount(el, host)` shows a trace document and keeps it up to date.
 *
 * Layer: front-end core, host-agnostic; imports the schema, layout, graph view and panels. The
 * entries (widget.ts for anywidget, standalone.ts for the HTML snapshot, later a JupyterLab mime
 * renderer) only adapt their host to `ExplorerHost`. The DOM it builds is the contract the
 * browser tests use (data-testid attributes, see docs/trace-schema.md's companion notes in
 * thunder_viz); all document text is rendered as text.
 */
import { counted, h, setAttrs } from "./dom";
import { headerControls, sideSplitter, zoomButton } from "./explorer-chrome";
import { GraphView } from "./graph-view";
import type { ExplorerHost } from "./host";
import { isLoaded } from "./lazy";
import type { StepLayout } from "./layout";
import { plumbingCount, withoutPlumbing } from "./plumbing";
import { StepLayouts } from "./layout-client";
import {
  overlapDetails,
  diffSummary,
  setDiffListsOpen,
  errorBox,
  executorsPanel,
  invalidBox,
  nodeDetails,
  runsTable,
  type NodeLink,
} from "./panels";
import { readDocument, type Step, type TraceDocument, type TraceNode } from "./schema";
import { defaultCollapsed } from "./scopes";
import {
  nameMatcher,
  normalizeQuery,
  searchIndex,
  searchResultItems,
  type SearchEntry,
} from "./search";
import { moduleCostText, nodeCostLine } from "./profile-view";
import { ProfilePane, profiledStep } from "./profile-pane";
import { SourcePane } from "./source-pane";
import { overlaps, type Overlap } from "./collectives";
import { canShow, entryPicker, entryView } from "./entries";
import { fillStepItem, gradientNodes, StepRelations, stepListItems, stepMeta } from "./steps";

const NO_CELLS: StepLayout = { ids: [], layer: new Int32Array(0), col: new Int32Array(0) };

/** Shows the host's document in `el`; returns the cleanup function. */
export function mount(el: HTMLElement, host: ExplorerHost): () => void {
  const explorer = new Explorer(el, host);
  return () => explorer.dispose();
}

class Explorer {
  private readonly doc: Document;
  private readonly root: HTMLElement;
  private readonly statusEl: HTMLElement;
  private readonly titleEl: HTMLElement;
  private readonly searchEl: HTMLInputElement;
  private readonly searchCount: HTMLElement;
  private readonly searchList: HTMLElement;
  private readonly errorSlot: HTMLElement;
  private readonly body: HTMLElement;
  private readonly stepList: HTMLElement;
  /** The cache entry picker, above the steps (entries.ts); empty with one entry. */
  private readonly entrySlot: HTMLElement;
  /** The cache entry shown (an index of `entries.items`); null with one entry. */
  private entry: number | null = null;
  private readonly stepHeader: HTMLElement;
  private readonly diffSlot: HTMLElement;
  /** Whether the diff's lists are open (kept from step to step). */
  private diffListsOpen = false;
  private readonly sourceEl: HTMLElement;
  private readonly detailsEl: HTMLElement;
  private readonly executorsSlot: HTMLElement;
  private readonly runsSlot: HTMLElement;
  private readonly profile: ProfilePane;
  private profiling = false;
  private hadProfile = false;
  /** The shown step's collectives and the compute each overlaps (collectives.ts). */
  private stepOverlaps = new Map<string, Overlap>();
  private marksOverlap = false;
  private readonly graph: GraphView;
  private readonly unsubscribe: () => void;

  private rawDoc: unknown = undefined;
  private model: TraceDocument | null = null;
  private layouts: StepLayouts | null = null;
  /** Cancels the pending read of the steps not shown yet (`readAhead`). */
  private cancelReadAhead: (() => void) | null = null;
  private stepIndex = 0;
  /** False until the first document is shown: it opens on the traced program, not the prologue. */
  private opened = false;
  private stepNodes = new Map<string, TraceNode>();
  private lineToNode = new Map<number, string>();
  private readonly source: SourcePane;
  private selected: string | null = null;
  private collapsed = new Map<string, boolean>();
  /** How the shown step's groups open: fusions and a big step's module scopes collapsed. */
  private opensCollapsed = new Map<string, boolean>();
  private query = "";
  private maximized = false;
  private readonly maximizeEl: HTMLButtonElement;
  /** Library bookkeeping (plumbing.ts) is folded away unless the user asks to see it. */
  private showPlumbing = false;
  private fullModel: TraceDocument | null = null;
  private readonly plumbingEl: HTMLElement;
  private readonly plumbingBox: HTMLInputElement;
  private wholeWord = false;
  private readonly wholeWordEl: HTMLButtonElement;
  private matches: string[] = [];
  private matchCursor = -1;
  /** The shown step's search index (see `searchIndex`), rebuilt when the step changes. */
  private searchCache: { step: Step; entries: SearchEntry[] } | null = null;
  /** A forward node selected before moving to a backward step: its gradient ops are marked. */
  private gradientOf: string | null = null;
  private rel = new StepRelations([]);
  private pending = new Set<string>();
  private busy = false;
  private disposed = false;
  private revealOnRender = false;
  private lastStatus = "";

  constructor(
    private readonly el: HTMLElement,
    private readonly host: ExplorerHost,
  ) {
    const doc = el.ownerDocument;
    this.doc = doc;
    this.graph = new GraphView(doc, {
      onSelect: (id) => this.select(id),
      onToggleGroup: (gid) => this.toggleGroup(gid),
    });
    const controls = headerControls(doc);
    this.titleEl = controls.titleEl;
    this.statusEl = controls.statusEl;
    this.searchEl = controls.searchEl;
    this.searchList = controls.searchList;
    this.searchCount = controls.searchCount;
    this.plumbingBox = controls.plumbingBox;
    this.plumbingEl = controls.plumbingEl;
    this.wholeWordEl = controls.wholeWordEl;
    this.maximizeEl = controls.maximizeEl;
    this.maximizeEl.addEventListener("click", () => this.setMaximized(!this.maximized));
    const header = h(
      doc,
      "header",
      { class: "tx-header" },
      h(doc, "span", { class: "tx-brand" }, "thunder"),
      this.titleEl,
      this.statusEl,
      h(doc, "span", { class: "tx-spacer" }),
      this.plumbingEl,
      h(doc, "span", { class: "tx-search-box" }, this.searchEl, this.searchList),
      this.wholeWordEl,
      this.searchCount,
      zoomButton(doc, "zoom-out", "−", "zoom out", () => this.graph.zoomBy(1 / 1.25)),
      zoomButton(doc, "zoom-in", "+", "zoom in", () => this.graph.zoomBy(1.25)),
      zoomButton(doc, "zoom-fit", "⤢", "fit graph", () => this.graph.fit()),
      this.maximizeEl,
    );
    this.errorSlot = h(doc, "div", { class: "tx-error-slot" });
    this.stepList = h(doc, "ul", {
      class: "tx-step-list",
      role: "listbox",
      "aria-label": "compilation steps",
    });
    this.entrySlot = h(doc, "div", { class: "tx-entry-slot" });
    this.stepHeader = h(doc, "div", { class: "tx-step-header" });
    this.diffSlot = h(doc, "div", { class: "tx-diff-slot" });
    this.sourceEl = h(doc, "div", {
      class: "tx-source",
      "data-testid": "source",
      role: "list",
      "aria-label": "trace source",
    });
    this.source = new SourcePane(this.sourceEl);
    this.detailsEl = h(doc, "section", {
      class: "tx-details",
      "data-testid": "node-details",
      "aria-live": "polite",
    });
    this.executorsSlot = h(doc, "div", { class: "tx-executors-slot" });
    this.runsSlot = h(doc, "div", { class: "tx-runs-slot" });
    this.profile = new ProfilePane(doc, (id) => this.select(id));
    this.body = h(
      doc,
      "div",
      { class: "tx-body" },
      h(
        doc,
        "nav",
        { class: "tx-steps", "aria-label": "steps" },
        this.entrySlot,
        h(doc, "h4", {}, "Steps"),
        this.stepList,
        this.graph.minimap.el,
      ),
      h(
        doc,
        "div",
        { class: "tx-graph-pane" },
        this.stepHeader,
        this.diffSlot,
        h(doc, "div", { class: "tx-graph-wrap" }, this.graph.svg, this.graph.wheelHint),
        this.profile.saved,
      ),
      h(
        doc,
        "div",
        { class: "tx-side" },
        sideSplitter(doc),
        h(
          doc,
          "section",
          { class: "tx-source-pane" },
          h(doc, "h4", {}, "Trace source"),
          this.sourceEl,
        ),
        this.detailsEl,
        this.profile.panel,
      ),
    );
    this.root = h(
      doc,
      "div",
      { class: "thunder-explorer", tabindex: 0, "data-ready": "false" },
      header,
      this.errorSlot,
      this.body,
      h(doc, "footer", { class: "tx-footer" }, this.executorsSlot, this.runsSlot),
    );
    el.replaceChildren(this.root);
    this.listen();
    this.unsubscribe = host.subscribe(() => this.update());
    this.update();
  }

  dispose(): void {
    this.disposed = true;
    this.unsubscribe();
    this.graph.dispose();
    this.source.clear();
    this.stopReadAhead();
    this.el.replaceChildren();
  }

  // -- document -------------------------------------------------------------------------------

  private update(): void {
    if (this.disposed) return;
    const raw = this.host.getDocument();
    const status = this.host.getStatus?.() ?? "";
    if (this.busy && status !== this.lastStatus && !/running/i.test(status)) {
      // the host finished (or failed) without a new document: let the user try again
      this.busy = false;
      this.profiling = false;
      this.renderExecutors();
      this.renderRuns();
    }
    this.lastStatus = status;
    if (raw !== this.rawDoc) {
      this.rawDoc = raw;
      this.busy = false;
      this.profiling = false;
      const result = readDocument(raw);
      if (result.ok) this.setDocument(result.doc);
      else this.showInvalid(result.errors);
    }
    this.renderStatus();
  }

  private showInvalid(errors: string[]): void {
    this.model = null;
    this.stopReadAhead();
    this.layouts = null;
    this.errorSlot.replaceChildren(invalidBox(this.doc, errors));
    this.body.hidden = true;
    this.executorsSlot.replaceChildren();
    this.runsSlot.replaceChildren();
    this.profile.clear();
    setAttrs(this.root, { "data-invalid": "true" });
  }

  private setDocument(full: TraceDocument): void {
    if (full !== this.fullModel) {
      // a new document (a rerun): the same entry if it has it (by label), else the last compiled
      const label = this.entry === null ? null : this.fullModel?.entries?.items[this.entry]?.label;
      const same = full.entries?.items.findIndex((e) => e.label === label) ?? -1;
      this.entry = same >= 0 && canShow(full, same) ? same : (full.entries?.shown ?? null);
    }
    this.fullModel = full;
    const view = entryView(full, this.entry);
    const model = this.showPlumbing ? view : withoutPlumbing(view);
    this.model = model;
    this.rel = new StepRelations(model.steps);
    this.body.hidden = false;
    setAttrs(this.root, { "data-invalid": null });
    this.titleEl.textContent = model.title;
    this.stopReadAhead();
    this.layouts = new StepLayouts(model.steps);
    this.pending = new Set(model.executors?.selected ?? []);
    this.renderStepList();
    this.entrySlot.replaceChildren(
      ...[entryPicker(this.doc, full, this.entry, (i) => this.showEntry(i))].filter(
        (e) => e !== null,
      ),
    );
    setAttrs(this.root, { "data-entry": this.entry });
    this.errorSlot.replaceChildren(
      ...(model.error ? [errorBox(this.doc, model.error, model.steps.length)] : []),
    );
    this.renderExecutors();
    this.renderRuns();
    this.scrollRunsToEnd();
    // a profile opens on the forward step it measured: on the first view, and when it arrives
    const profiled = profiledStep(model);
    if (!this.opened) {
      this.opened = true;
      this.stepIndex = Math.max(
        0,
        model.steps.findIndex((s) => s.kind === "computation"),
      );
      if (profiled >= 0) this.stepIndex = profiled;
    } else if (profiled >= 0 && !this.hadProfile) {
      this.stepIndex = profiled;
    }
    this.hadProfile = profiled >= 0;
    this.showStep(Math.min(this.stepIndex, Math.max(0, model.steps.length - 1)));
    this.readAhead();
  }

  /**
   * Shows the steps of cache entry `entry`, on the step of the same kind and pass as the one shown
   * (the prefill's and the decoding entry's passes are the same), else on its traced program.
   */
  private showEntry(entry: number): void {
    const full = this.fullModel;
    if (!full || entry === this.entry || !canShow(full, entry)) return;
    const current = this.currentStep();
    this.entry = entry;
    this.selected = null; // node ids are per entry: the same id may be another op
    this.gradientOf = null;
    const steps = entryView(full, entry).steps;
    const same = steps.findIndex((s) => s.kind === current?.kind && s.pass === current?.pass);
    this.stepIndex =
      same >= 0
        ? same
        : Math.max(
            0,
            steps.findIndex((s) => s.kind === "computation"),
          );
    this.hadProfile = true; // (a profile opens on its step when it arrives, not when its entry is picked)
    this.setDocument(full);
  }

  /**
   * Reads and lays out the steps not shown yet, one per idle moment (Note [Lazy steps] in
   * schema.ts): the first render paid only for the step it shows, and the others are ready
   * before the user picks one. Their ops and changes then appear in the list of steps. The steps
   * of the shown kind come first, then the other forward or backward steps, the prologue's last:
   * they are the biggest (a check per parameter) and the least visited, and reading them first
   * left a 12-layer GPT-2's backward steps unread for most of a second.
   */
  private readAhead(): void {
    const model = this.model;
    const layouts = this.layouts;
    if (!model || !layouts || this.disposed) return;
    const shown = this.currentStep()?.kind;
    const rank = (s: Step): number => (s.kind === shown ? 0 : s.kind === "prologue" ? 2 : 1);
    let next = -1;
    model.steps.forEach((s, i) => {
      const unread = !isLoaded(s, "nodes") || !layouts.has(i);
      if (unread && (next < 0 || rank(s) < rank(model.steps[next] as Step))) next = i;
    });
    if (next < 0) return;
    const run = (): void => {
      this.cancelReadAhead = null;
      if (this.model !== model || this.disposed) return;
      layouts.get(next);
      this.renderReadSteps();
      this.readAhead();
    };
    const view = this.doc.defaultView;
    if (view && typeof view.requestIdleCallback === "function") {
      const id = view.requestIdleCallback(run, { timeout: 1000 });
      this.cancelReadAhead = () => view.cancelIdleCallback(id);
    } else {
      const id = setTimeout(run, 0);
      this.cancelReadAhead = () => clearTimeout(id);
    }
  }

  private stopReadAhead(): void {
    this.cancelReadAhead?.();
    this.cancelReadAhead = null;
  }

  /** The bookkeeping toggle, with the count of what the steps read so far hide. */
  private renderPlumbingToggle(): void {
    const plumbing = this.fullModel ? plumbingCount(this.fullModel) : 0;
    this.plumbingEl.hidden = plumbing === 0;
    this.plumbingEl.lastChild!.textContent = ` show bookkeeping (${plumbing})`;
  }

  private renderStepList(): void {
    if (this.model) this.stepList.replaceChildren(...stepListItems(this.doc, this.model));
  }

  private renderExecutors(): void {
    const model = this.model;
    if (!model) return;
    const info = model.executors;
    const canRerun = typeof this.host.requestRerun === "function";
    const interactive = Boolean(info?.interactive) && canRerun;
    const reason = !info
      ? "This document does not record the executors."
      : !info.interactive
        ? (info.reason ?? "No running kernel: executors cannot be changed here.")
        : "No running kernel: executors cannot be changed here.";
    this.executorsSlot.replaceChildren(
      executorsPanel(
        this.doc,
        {
          info,
          interactive,
          reason,
          pending: this.pending,
          busy: this.busy,
          profiled: Boolean(model.profile),
        },
        (name, on) => {
          if (on) this.pending.add(name);
          else this.pending.delete(name);
        },
        () => this.rerun(),
      ),
    );
  }

  private renderRuns(): void {
    const model = this.model;
    if (!model) return;
    const canProfile = typeof this.host.requestProfile === "function";
    const action = canProfile
      ? {
          enabled: Boolean(model.executors?.interactive),
          busy: this.busy,
          onProfile: () => this.requestProfile(),
        }
      : null;
    this.runsSlot.replaceChildren(runsTable(this.doc, model.runs, action));
  }

  /**
   * The latest run in view when there are many. Just before the next paint, which lays the page
   * out anyway: reading a height now would lay it out one more time, before the graph is built.
   */
  private scrollRunsToEnd(): void {
    const footer = this.runsSlot.parentElement;
    const view = this.doc.defaultView;
    if (!footer || !view) return;
    view.requestAnimationFrame(() => (footer.scrollTop = footer.scrollHeight));
  }

  private requestProfile(): void {
    if (!this.host.requestProfile || this.busy) return;
    this.busy = true;
    this.profiling = true;
    this.renderExecutors();
    this.renderRuns();
    this.renderStatus();
    this.host.requestProfile();
  }

  private rerun(): void {
    const info = this.model?.executors;
    if (!info || !this.host.requestRerun || this.busy) return;
    const chosen = info.available.filter((e) => this.pending.has(e) || info.always.includes(e));
    this.busy = true;
    this.renderExecutors();
    this.renderStatus();
    this.host.requestRerun(chosen);
  }

  private renderStatus(): void {
    const hostStatus = this.host.getStatus?.() ?? "ready";
    const waiting = this.profiling ? "profiling…" : "running…";
    let text = this.busy && !/running/i.test(hostStatus) ? waiting : hostStatus || "ready";
    // A document that records a failure is not "ready": say where it failed.
    const failure = this.model?.error;
    if (failure && text === "ready") text = `error while ${failure.stage}`;
    this.statusEl.textContent = text;
    this.statusEl.classList.toggle("busy", /running|compil/i.test(text));
    this.statusEl.classList.toggle("failed", /^error/i.test(text));
  }

  // -- steps ----------------------------------------------------------------------------------

  /** `fromSelection`: the node selected in the step being left (a link click replaces it). */
  private showStep(index: number, fromSelection: string | null = this.selected): void {
    const model = this.model;
    if (!model || !this.layouts) return;
    const step = model.steps[index];
    this.gradientOf = this.gradientSource(this.currentStep(), fromSelection, step);
    this.stepIndex = index;
    for (const li of Array.from(this.stepList.children)) {
      if (li.getAttribute("data-step-index") === null) continue;
      setAttrs(li, {
        "aria-selected": li.getAttribute("data-step-index") === String(index) ? "true" : "false",
      });
    }
    if (!step) {
      this.renderEmpty();
      return;
    }
    // a step whose body failed its check draws nothing (not even its output): its problems say why
    const unreadable = Boolean(step.problems?.length);
    const layout = unreadable ? NO_CELLS : this.layouts.get(index);
    this.renderReadSteps(); // before the graph measures its viewport (renderStep)
    this.renderStep(step, layout);
  }

  /**
   * What the steps read since the last call add: their ops and changes in the list of steps
   * (showing a step reads the earlier steps of its kind too), and the bookkeeping they hide.
   */
  private renderReadSteps(): void {
    const steps = this.model?.steps ?? [];
    for (const li of Array.from(this.stepList.querySelectorAll("[data-step-index]"))) {
      const step = steps[Number(li.getAttribute("data-step-index"))];
      if (!step || li.hasAttribute("data-read") || !isLoaded(step, "nodes")) continue;
      fillStepItem(li, step);
      li.setAttribute("data-read", "true");
    }
    this.renderPlumbingToggle();
  }

  private renderEmpty(): void {
    this.stepHeader.textContent = "No steps completed.";
    this.diffSlot.replaceChildren();
    this.source.clear();
    this.detailsEl.replaceChildren();
    setAttrs(this.root, { "data-ready": "true" });
  }

  private renderStep(step: Step, layout: StepLayout): void {
    const doc = this.doc;
    this.stepNodes = new Map(step.nodes.map((n) => [n.id, n]));
    this.stepOverlaps = overlaps(step);
    const diffClass = new Map<string, string>();
    if (step.diff) {
      for (const id of step.diff.added) diffClass.set(id, "diff-added");
      for (const id of step.diff.rewritten) diffClass.set(id, "diff-rewritten");
      for (const id of Object.keys(step.diff.fused)) diffClass.set(id, "diff-fused");
    }
    this.stepHeader.replaceChildren(
      h(doc, "strong", {}, `Step ${step.index}: ${step.pass}`),
      h(doc, "span", { class: "tx-muted" }, ` ${stepMeta(step)}`),
    );
    const problems = step.problems ?? [];
    this.diffSlot.replaceChildren(
      problems.length
        ? invalidBox(doc, problems, "This step cannot be shown")
        : diffSummary(doc, step.diff, this.rel.previous(step), step, this.diffListsOpen),
    );

    this.lineToNode = new Map();
    for (const n of step.nodes)
      if (n.line !== null && !this.lineToNode.has(n.line)) this.lineToNode.set(n.line, n.id);
    this.source.show(step.source, (line) => {
      const nid = this.lineToNode.get(line);
      if (nid === undefined) return "";
      const diff = diffClass.get(nid);
      return diff ? `${diff} has-node` : "has-node";
    });
    // The graph last: it measures its viewport, which lays out the page once, with everything.
    const big = defaultCollapsed(step);
    this.opensCollapsed = new Map(step.groups.map((g) => [g.id, g.collapsed || big.has(g.id)]));
    const sp = this.profile.setStep(this.model, step);
    this.profile.render(this.model, step, this.stepNodes);
    if (this.selected !== null && !this.stepNodes.has(this.selected)) this.selected = null;
    if (this.selected === null) this.renderDetails(undefined); // as applySelection will: before the measure
    const backward = step.kind === "backward";
    this.graph.setStep({
      step,
      layout,
      diffClass,
      isCollapsed: (gid) => this.isCollapsed(gid),
      profile: sp,
      groupNote: (g) => (sp && g.kind === "module" ? moduleCostText(sp, g.label, backward) : null),
    });

    // a link that lands on a node inside a collapsed group (e.g. a fusion member) opens it
    if (this.revealOnRender && this.selected !== null) this.expandAncestors(this.selected);
    this.applySelection(this.revealOnRender, this.selected !== null);
    this.revealOnRender = false;
    this.applySearch();
    setAttrs(this.root, { "data-ready": "true", "data-step-index": step.index });
  }

  /** The forward node whose gradient ops `to` marks after leaving `from` with `selected`. */
  private gradientSource(
    from: Step | undefined,
    selected: string | null,
    to: Step | undefined,
  ): string | null {
    if (to?.kind !== "backward") return null;
    if (from?.kind === "backward") return this.gradientOf;
    if (
      from?.kind === "computation" &&
      selected !== null &&
      from.nodes.some((n) => n.id === selected)
    )
      return selected;
    return null;
  }

  /** Nodes of the shown step computing the gradient of `gradientOf`. */
  private gradientMarks(): string[] {
    const of = this.gradientOf;
    const step = this.currentStep();
    const forward = of === null ? undefined : this.rel.forward(of);
    if (of === null || !forward || step?.kind !== "backward") return [];
    return gradientNodes(step, forward, of).map((n) => n.id);
  }

  // -- selection ------------------------------------------------------------------------------

  /** A search `preview` (as you type) leaves collapsed groups shut and gradient marks on. */
  private select(nodeId: string | null, reveal = true, preview = false): void {
    if (this.gradientOf !== null && !preview) {
      this.gradientOf = null; // the user moved on: the marks were for the forward node
      this.applyMarks();
    }
    this.selected = nodeId !== null && this.stepNodes.has(nodeId) ? nodeId : null;
    if (this.selected !== null && !preview) this.expandAncestors(this.selected);
    this.applySelection(reveal);
  }

  /** Opens collapsed groups hiding a node the user asked for. */
  private expandAncestors(nodeId: string): void {
    const rep = this.graph.representative(nodeId);
    if (rep === nodeId) return; // visible already (undefined: hidden, e.g. an expanded fusion node)
    const step = this.currentStep();
    if (!step) return;
    const byId = new Map(step.groups.map((g) => [g.id, g]));
    for (const g of step.groups) {
      if (!g.nodes.includes(nodeId)) continue;
      const seen = new Set<string>();
      for (
        let cur: typeof g | undefined = g;
        cur && !seen.has(cur.id);
        cur = cur.parent === null ? undefined : byId.get(cur.parent)
      ) {
        seen.add(cur.id);
        this.collapsed.set(cur.id, false);
      }
    }
    this.graph.refresh();
  }

  /** A selected collective or wait marks itself, its partner and the compute between them. */
  private overlapMarks(): string[] {
    const o = this.selected === null ? undefined : this.stepOverlaps.get(this.selected);
    if (!o) return [];
    return [o.collective, ...(o.wait === null ? [] : [o.wait]), ...o.compute];
  }

  /** `details`: false when the details pane shows this selection already. */
  private applySelection(reveal: boolean, details = true): void {
    const id = this.selected;
    this.graph.setSelected(id);
    if (this.marksOverlap || this.overlapMarks().length) this.applyMarks();
    this.marksOverlap = this.overlapMarks().length > 0;
    const node = id === null ? undefined : this.stepNodes.get(id);
    const line = node && node.line !== null ? node.line : null;
    this.source.setCurrent(line);
    if (line !== null && reveal) this.source.reveal(line);
    if (node && reveal) this.graph.reveal(node.id);
    if (details) this.renderDetails(node);
  }

  private renderDetails(node: TraceNode | undefined): void {
    const step = this.currentStep();
    if (!node || !step) {
      const marked = this.gradientMarks().length;
      const of = this.gradientOf === null ? undefined : this.rel.forward(this.gradientOf);
      const ofNode = of?.nodes.find((n) => n.id === this.gradientOf);
      this.detailsEl.replaceChildren(
        h(
          this.doc,
          "p",
          { class: "tx-muted" },
          "Select a node in the graph or a line of the source.",
        ),
        ...(ofNode
          ? [
              h(
                this.doc,
                "p",
                { class: "tx-muted", "data-testid": "gradient-marks" },
                `Marked: ${marked} op${marked === 1 ? "" : "s"} computing the gradient of ${ofNode.op} (${ofNode.id}).`,
              ),
            ]
          : []),
      );
      return;
    }
    const prev = this.rel.previous(step);
    const first = this.rel.firstOfKind(step);
    const steps = this.model?.steps ?? [];
    const link = (s: Step | undefined, id: string): NodeLink => ({
      stepIndex: s ? steps.indexOf(s) : -1,
      id,
      node: s?.nodes.find((n) => n.id === id),
    });
    const lineage = node.lineage.map((id) => link(prev, id));
    // A backward node's origin names forward nodes; any other node's, the first step of its kind.
    const origin =
      step.kind === "backward"
        ? node.origin.map((id) => link(this.rel.forward(id), id))
        : first && first !== step
          ? node.origin.map((id) => link(first, id))
          : [];
    const backward = step.kind === "computation" ? this.rel.lastBackward() : undefined;
    const gradients = backward
      ? gradientNodes(backward, step, node.id).map((n) => link(backward, n.id))
      : null;
    const diff = step.diff;
    let diffLabel: string | null = null;
    if (diff) {
      if (diff.added.includes(node.id)) diffLabel = "added by this pass";
      else if (diff.rewritten.includes(node.id)) diffLabel = "rewritten by this pass";
      else if (diff.fused[node.id])
        diffLabel = `fusion of ${counted(diff.fused[node.id]?.length ?? 0, "op")} from the previous step`;
    }
    const fusion = node.fused_into === null ? undefined : this.stepNodes.get(node.fused_into);
    const [title, ...rest] = nodeDetails(
      this.doc,
      node,
      step,
      fusion,
      lineage.filter((l) => l.stepIndex >= 0),
      origin.filter((l) => l.stepIndex >= 0),
      gradients,
      diffLabel,
    );
    // what was measured and what overlaps first: below the title, above the node's facts
    this.detailsEl.replaceChildren(
      ...(title ? [title] : []),
      ...nodeCostLine(this.doc, this.profile.current, node),
      ...overlapDetails(this.doc, this.stepOverlaps.get(node.id), this.stepNodes, this.stepIndex),
      ...rest,
    );
  }

  /** The user's choice, else how the step opens (Note [Opening big graphs]). */
  private isCollapsed(gid: string): boolean {
    return this.collapsed.get(gid) ?? this.opensCollapsed.get(gid) ?? false;
  }

  private toggleGroup(gid: string): void {
    this.collapsed.set(gid, !this.isCollapsed(gid));
    this.graph.refresh();
    this.graph.setSelected(this.selected);
  }

  private currentStep(): Step | undefined {
    return this.model?.steps[this.stepIndex];
  }

  // -- search ---------------------------------------------------------------------------------

  /** The shown step's nodes with the names a search can hit (`searchIndex`). */
  private searchEntries(): SearchEntry[] {
    const step = this.currentStep();
    if (!step) return [];
    if (this.searchCache?.step !== step) this.searchCache = { step, entries: searchIndex(step) };
    return this.searchCache.entries;
  }

  /** Marks the matches of the query in the shown step and lists them under the search box. */
  private applySearch(): void {
    const q = normalizeQuery(this.query);
    const hit = nameMatcher(q, this.wholeWord);
    this.matches = q
      ? this.searchEntries()
          .filter((e) => e.names.some(hit))
          .map((e) => e.node.id)
      : [];
    this.matchCursor = -1;
    this.applyMarks();
    const count = this.matches.length;
    this.searchCount.textContent = q ? `${count} match${count === 1 ? "" : "es"}` : "";
    this.renderSearchList();
  }

  private renderSearchList(): void {
    const shown = searchResultItems(this.doc, this.matches, this.stepNodes, this.query);
    this.searchList.replaceChildren(...shown);
    this.searchList.hidden = !shown.length || this.doc.activeElement !== this.searchEl;
  }

  /** Selects match `i` (a preview leaves collapsed groups shut) and marks it in the list. */
  private showMatch(i: number, preview = false): void {
    this.matchCursor = i;
    for (const b of Array.from(this.searchList.querySelectorAll("[data-match-index]")))
      setAttrs(b, {
        "aria-selected": b.getAttribute("data-match-index") === String(i) ? "true" : "false",
      });
    const id = this.matches[i] ?? null;
    // typing on often keeps the first match: nothing to redo then
    if (!preview || id !== this.selected) this.select(id, true, preview);
    if (!preview && id !== null) this.graph.reveal(id, true); // chosen: at a zoom that reads
  }

  /** Search matches and gradient marks share the search-match styling. */
  private applyMarks(): void {
    const set = new Set([...this.matches, ...this.gradientMarks(), ...this.overlapMarks()]);
    this.graph.setMatches(set);
    const lines = new Set<number>();
    for (const id of set) {
      const line = this.stepNodes.get(id)?.line;
      if (line !== null && line !== undefined) lines.add(line);
    }
    this.source.setMarks(lines);
  }

  private nextMatch(delta: number): void {
    if (!this.matches.length) return;
    this.showMatch((this.matchCursor + delta + this.matches.length) % this.matches.length);
  }

  // -- input ----------------------------------------------------------------------------------

  private listen(): void {
    this.searchEl.addEventListener("input", () => {
      this.query = this.searchEl.value;
      this.applySearch();
      if (this.matches.length) this.showMatch(0, true); // the first match in view as you type
    });
    this.searchEl.addEventListener("focus", () => this.renderSearchList());
    this.plumbingBox.addEventListener("change", () => {
      this.showPlumbing = this.plumbingBox.checked;
      if (this.fullModel) this.setDocument(this.fullModel);
    });
    this.wholeWordEl.addEventListener("click", () => {
      this.wholeWord = !this.wholeWord;
      setAttrs(this.wholeWordEl, { "aria-pressed": String(this.wholeWord) });
      this.applySearch();
    });
    this.searchEl.addEventListener("blur", () => (this.searchList.hidden = true));
    // keep the focus in the search box: a click on a match must not close the list under it
    this.searchList.addEventListener("mousedown", (e) => e.preventDefault());
    this.searchList.addEventListener("click", (e) => {
      const b = (e.target as Element | null)?.closest?.("[data-testid='search-result']");
      const i = Number(b?.getAttribute("data-match-index"));
      if (b && Number.isInteger(i)) this.showMatch(i);
    });
    this.searchEl.addEventListener("keydown", (e) => {
      if (e.key === "Enter") {
        e.preventDefault();
        this.nextMatch(e.shiftKey ? -1 : 1);
      } else if (e.key === "Escape") {
        this.searchEl.value = "";
        this.query = "";
        this.applySearch();
        this.root.focus();
      }
      e.stopPropagation();
    });
    this.stepList.addEventListener("click", (e) => {
      const li = (e.target as Element | null)?.closest?.("[data-testid='step']");
      const index = li?.getAttribute("data-step-index");
      if (index === null || index === undefined) return;
      this.showStep(Number(index));
      this.root.focus();
    });
    this.sourceEl.addEventListener("click", (e) => {
      const lineEl = (e.target as Element | null)?.closest?.("[data-testid='source-line']");
      const line = Number(lineEl?.getAttribute("data-line"));
      if (!lineEl || !Number.isFinite(line)) return;
      const nid = this.lineToNode.get(line);
      if (nid !== undefined) {
        this.select(nid);
      } else {
        this.select(null, false);
        lineEl.setAttribute("aria-current", "true");
      }
    });
    this.detailsEl.addEventListener("click", (e) => {
      const link = (e.target as Element | null)?.closest?.("[data-testid='lineage-link']");
      if (!link) return;
      this.followLink(
        Number(link.getAttribute("data-step-index")),
        link.getAttribute("data-node-id"),
      );
    });
    this.diffSlot.addEventListener("click", (e) => {
      const toggle = (e.target as Element | null)?.closest?.("[data-testid='diff-toggle']");
      if (toggle) {
        this.diffListsOpen = !this.diffListsOpen;
        const summary = toggle.closest("[data-testid='diff-summary']");
        if (summary) setDiffListsOpen(summary, this.diffListsOpen);
        return;
      }
      const link = (e.target as Element | null)?.closest?.("[data-testid='diff-link']");
      if (!link) return;
      const stepId = link.getAttribute("data-link-step");
      const index = this.model?.steps.findIndex((st) => st.id === stepId) ?? -1;
      this.followLink(index, link.getAttribute("data-link-node"));
    });
    this.root.addEventListener("keydown", (e) => this.onKey(e));
  }

  /** Selects node `nid` of step `index` (a link in the details or the diff). */
  private followLink(index: number, nid: string | null): void {
    if (!Number.isInteger(index) || index < 0 || nid === null) return;
    if (index === this.stepIndex) {
      this.select(nid);
      return;
    }
    const from = this.selected;
    this.selected = nid;
    this.revealOnRender = true;
    this.showStep(index, from);
    this.root.focus(); // the clicked link is gone with the old details: keep the keys working
  }

  /** The explorer over the whole tab (the notebook panel), or back in its cell. */
  private setMaximized(on: boolean): void {
    this.maximized = on;
    this.root.classList.toggle("tx-maximized", on);
    setAttrs(this.maximizeEl, { "aria-pressed": String(on) });
    this.root.focus();
  }

  private onKey(e: KeyboardEvent): void {
    if (e.key === "Escape" && this.maximized) {
      this.setMaximized(false);
      e.preventDefault();
      return;
    }
    const target = e.target as HTMLElement | null;
    if (
      target &&
      (target.tagName === "INPUT" || target.tagName === "TEXTAREA" || target.tagName === "BUTTON")
    ) {
      if (target.tagName !== "BUTTON" || (e.key !== "ArrowDown" && e.key !== "ArrowUp")) return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const steps = this.model?.steps.length ?? 0;
    let handled = true;
    switch (e.key) {
      case "ArrowDown":
      case "j":
        if (this.stepIndex + 1 < steps) this.showStep(this.stepIndex + 1);
        break;
      case "ArrowUp":
      case "k":
        if (this.stepIndex > 0) this.showStep(this.stepIndex - 1);
        break;
      case "Home":
        if (steps) this.showStep(0);
        break;
      case "End":
        if (steps) this.showStep(steps - 1);
        break;
      case "/":
        this.searchEl.focus();
        break;
      case "+":
      case "=":
        this.graph.zoomBy(1.25);
        break;
      case "-":
        this.graph.zoomBy(1 / 1.25);
        break;
      case "0":
        this.graph.fit();
        break;
      case "n":
        this.nextMatch(1);
        break;
      case "Escape":
        this.select(null, false);
        break;
      default:
        handled = false;
    }
    if (handled) e.preventDefault();
  }
}

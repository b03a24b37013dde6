/**
 * The graph of one step as a single SVG: nodes, value edges, groups; pan, zoom, fit, culling,
 * and an overview (minimap.ts) of it.
 *
 * Layer: front-end core; imports the schema types, the layout's output, what scopes.ts makes of
 * a step's scopes and `del` statements, the minimap and the safe DOM helpers.
 * It owns no explorer state: the explorer tells it which step, which groups are collapsed, what
 * is selected and what matches the search, and hears back about clicks.
 *
 * Note [Graph rendering cost]: all edges are one <path> (one element however many edges), nodes
 * are a <g> with two rects and two texts, built into a fragment and attached once. Above
 * CULL_THRESHOLD items only those near the viewport are built; panning inside the built region
 * only moves a transform, leaving it rebuilds the region (once per animation frame).
 */
import { h, s, setAttrs } from "./dom";
import { groupBoxElement, itemElement, type DrawContext } from "./graph-elements";
import {
  buildScene,
  edgePathData,
  sceneBounds,
  type GraphState,
  type GroupBox,
  type Item,
} from "./graph-scene";
import { Minimap } from "./minimap";
import type { Group } from "./schema";
import { delNotes, groupChains, scopeStats, type DelNote, type ScopeStats } from "./scopes";

export { executorClass } from "./graph-elements";
export { compactAxis, NODE_H, NODE_W, type GraphState } from "./graph-scene";

/** Above this many items only those near the viewport are built (a BERT's 1,225-op prologue, no
 * module scope to collapse, took 150-280 ms of CPU to build whole; 40 ms culled). */
const CULL_THRESHOLD = 300;
const MIN_ZOOM = 0.05;
/** A step opens no smaller than this (text is hidden below 0.4); "fit" goes as small as it takes. */
const OPEN_ZOOM = 0.6;
const MAX_ZOOM = 4;
/** Below this graph height (px) the overview is hidden: it would take room the graph needs. */
const MINIMAP_MIN_PANE = 360;

export interface GraphCallbacks {
  onSelect(nodeId: string | null): void;
  onToggleGroup(groupId: string): void;
}

interface View {
  tx: number;
  ty: number;
  k: number;
}

export class GraphView {
  readonly svg: SVGSVGElement;
  /** The overview; the explorer places it over the graph. */
  readonly minimap: Minimap;
  /** "Click the graph or hold Ctrl to zoom": shown a moment when the wheel scrolled the page. */
  readonly wheelHint: HTMLElement;
  private engaged = false;
  private hintTimer: ReturnType<typeof setTimeout> | undefined = undefined;
  private readonly viewport: SVGElement;
  private readonly groupLayer: SVGElement;
  private readonly edgePath: SVGElement;
  private readonly selectedEdgePath: SVGElement;
  private readonly nodeLayer: SVGElement;
  private readonly doc: Document;

  private state: GraphState | null = null;
  private chains = new Map<string, Group[]>();
  private stats = new Map<string, ScopeStats>();
  private notes = new Map<string, DelNote>();
  private items: Item[] = [];
  private itemByKey = new Map<string, Item>();
  private repOf = new Map<string, string>();
  private edges: [Item, Item][] = [];
  private boxes: GroupBox[] = [];
  private rendered = new Map<string, SVGElement>();
  private region: { x0: number; y0: number; x1: number; y1: number } | null = null;
  private view: View = { tx: 20, ty: 20, k: 1 };
  private hasView = false;
  private selected: string | null = null;
  private matches = new Set<string>();
  private frame = 0;
  private measured: { width: number; height: number } | null = null;
  /** A ResizeObserver keeps `measured` up to date (else it is read again for each step). */
  private readonly observed: boolean;
  private readonly cleanups: (() => void)[] = [];

  constructor(
    doc: Document,
    private readonly callbacks: GraphCallbacks,
  ) {
    this.doc = doc;
    this.svg = s(doc, "svg", {
      "data-testid": "graph",
      class: "graph",
      role: "img",
      "aria-label": "trace graph",
    }) as SVGSVGElement;
    this.viewport = s(doc, "g", { class: "viewport" });
    this.groupLayer = s(doc, "g", { class: "groups" });
    this.edgePath = s(doc, "path", { class: "edges", d: "" });
    this.selectedEdgePath = s(doc, "path", { class: "edges-selected", d: "" });
    this.nodeLayer = s(doc, "g", { class: "nodes" });
    this.viewport.append(this.groupLayer, this.edgePath, this.selectedEdgePath, this.nodeLayer);
    this.svg.appendChild(this.viewport);
    this.minimap = new Minimap(doc, (x, y) => this.centerOn(x, y));
    this.wheelHint = h(
      doc,
      "div",
      { class: "tx-wheel-hint", "data-testid": "wheel-hint", hidden: true },
      "Click the graph, or hold Ctrl (⌘) while scrolling, to zoom",
    );
    this.listen();
    this.observed = typeof ResizeObserver === "function";
    if (this.observed) {
      const observer = new ResizeObserver((entries) => {
        const box = entries[entries.length - 1]?.contentRect;
        if (!box || !box.width || !box.height) return;
        // its first report repeats the size measured for the first render: nothing to redo
        const known = this.measured;
        if (
          known &&
          Math.abs(known.width - box.width) < 1 &&
          Math.abs(known.height - box.height) < 1
        )
          return;
        this.measured = { width: box.width, height: box.height };
        this.onViewChanged();
      });
      observer.observe(this.svg);
      this.cleanups.push(() => observer.disconnect());
    }
  }

  /**
   * Shows a step, keeping the current pan and zoom so that surviving nodes stay put on screen;
   * a step with nothing where the view is (a backward step after the forward) opens afresh.
   */
  setStep(state: GraphState): void {
    this.state = state;
    this.chains = groupChains(state.step);
    this.stats = scopeStats(state.step, this.chains, state.profile?.costs ?? null);
    this.notes = delNotes(state.step);
    if (!this.observed) this.measured = null;
    this.build();
    if (!this.hasView || !this.anythingInView()) {
      this.fitWithin(OPEN_ZOOM);
      this.hasView = true;
    } else {
      this.applyView();
    }
    this.render();
  }

  /** Rebuilds after groups were collapsed or expanded. */
  refresh(): void {
    if (!this.state) return;
    this.build();
    this.render();
  }

  setSelected(nodeId: string | null): void {
    this.selected = nodeId;
    for (const [key, el] of this.rendered)
      setAttrs(el, { "aria-selected": key === nodeId ? "true" : null });
    for (const el of Array.from(this.groupLayer.children)) {
      const box = this.boxes.find((b) => b.group.id === el.getAttribute("data-group-id"));
      setAttrs(el, {
        "aria-selected":
          box && box.group.node !== null && box.group.node === nodeId ? "true" : null,
      });
    }
    this.drawSelectedEdges();
  }

  setMatches(ids: Set<string>): void {
    this.matches = ids;
    for (const [key, el] of this.rendered) el.classList.toggle("search-match", ids.has(key));
  }

  /** The key of the item standing for a node: itself, or the collapsed group hiding it. */
  representative(nodeId: string): string | undefined {
    return this.repOf.get(nodeId);
  }

  /** Brings an item into view if it is outside the viewport; `readable` (a search result the
   * user chose) also zooms in, centred on it, when the view is too small to read its label. */
  reveal(nodeId: string, readable = false): void {
    const item = this.itemByKey.get(this.repOf.get(nodeId) ?? nodeId);
    if (!item) return;
    const { width, height } = this.size();
    const { tx, ty } = this.view;
    let { k } = this.view;
    const sx = item.x * k + tx;
    const sy = item.y * k + ty;
    const small = readable && k < OPEN_ZOOM;
    if (small) k = OPEN_ZOOM;
    else if (sx >= 0 && sy >= 0 && sx + item.w * k <= width && sy + item.h * k <= height) return;
    this.view = {
      k,
      tx: width / 2 - (item.x + item.w / 2) * k,
      ty: height / 2 - (item.y + item.h / 2) * k,
    };
    this.onViewChanged();
  }

  zoomBy(factor: number, cx?: number, cy?: number): void {
    const { width, height } = this.size();
    const px = cx ?? width / 2;
    const py = cy ?? height / 2;
    const b = this.bounds();
    const min = b ? Math.min(MIN_ZOOM, this.fitZoom(b)) : MIN_ZOOM;
    const k = Math.min(MAX_ZOOM, Math.max(min, this.view.k * factor));
    const f = k / this.view.k;
    this.view = { k, tx: px - (px - this.view.tx) * f, ty: py - (py - this.view.ty) * f };
    this.onViewChanged();
  }

  /** Fits the whole graph in the viewport, however small that makes it. */
  fit(): void {
    this.fitWithin(0);
  }

  /** Centres the view on a graph point (the minimap's clicks). */
  centerOn(x: number, y: number): void {
    const { width, height } = this.size();
    const { k } = this.view;
    this.view = { k, tx: width / 2 - x * k, ty: height / 2 - y * k };
    this.onViewChanged();
  }

  private anythingInView(): boolean {
    const { width, height } = this.size();
    const { tx, ty, k } = this.view;
    return this.items.some(
      (it) =>
        (it.x + it.w) * k + tx >= 0 &&
        it.x * k + tx <= width &&
        (it.y + it.h) * k + ty >= 0 &&
        it.y * k + ty <= height,
    );
  }

  private fitZoom(b: { x0: number; y0: number; x1: number; y1: number }): number {
    const { width, height } = this.size();
    return Math.min((width - 40) / (b.x1 - b.x0), (height - 40) / (b.y1 - b.y0));
  }

  /** Fits the graph if it can be shown at `minZoom` or larger, else shows its top at `minZoom`. */
  private fitWithin(minZoom: number): void {
    const b = this.bounds();
    const { width, height } = this.size();
    if (!b) return;
    const k = Math.min(1, Math.max(minZoom, this.fitZoom(b)));
    const contentW = (b.x1 - b.x0) * k;
    const tx = contentW < width ? (width - contentW) / 2 - b.x0 * k : 20 - b.x0 * k;
    const contentH = (b.y1 - b.y0) * k;
    const ty = contentH < height ? (height - contentH) / 2 - b.y0 * k : 20 - b.y0 * k;
    this.view = { tx, ty, k };
    this.onViewChanged();
  }

  /** Pans by a screen-space offset. */
  panBy(dx: number, dy: number): void {
    this.view = { ...this.view, tx: this.view.tx + dx, ty: this.view.ty + dy };
    this.onViewChanged();
  }

  /** Whether the wheel zooms the graph (it was clicked) rather than scrolling the page. */
  get wheelZooms(): boolean {
    return this.engaged;
  }

  private setEngaged(on: boolean): void {
    this.engaged = on;
    this.svg.classList.toggle("engaged", on);
    if (on) this.wheelHint.hidden = true;
  }

  private showWheelHint(): void {
    this.wheelHint.hidden = false;
    clearTimeout(this.hintTimer);
    this.hintTimer = setTimeout(() => (this.wheelHint.hidden = true), 1500);
  }

  dispose(): void {
    clearTimeout(this.hintTimer);
    cancelAnimationFrameSafe(this.frame);
    for (const c of this.cleanups) c();
    this.cleanups.length = 0;
  }

  // -- model --------------------------------------------------------------------------------

  private build(): void {
    if (!this.state) return;
    const scene = buildScene(this.state, this.chains, this.stats, this.notes);
    this.items = scene.items;
    this.itemByKey = scene.itemByKey;
    this.repOf = scene.repOf;
    this.edges = scene.edges;
    this.boxes = scene.boxes;
    this.region = null;
    const b = this.bounds();
    if (b)
      this.minimap.setContent({ x: b.x0, y: b.y0, w: b.x1 - b.x0, h: b.y1 - b.y0 }, this.items);
  }

  private bounds(): { x0: number; y0: number; x1: number; y1: number } | null {
    return sceneBounds(this.items);
  }

  // -- rendering ----------------------------------------------------------------------------

  /**
   * The viewport size. Reading it forces a layout, so it is read once (after the explorer has
   * built everything else) and then kept up to date by a ResizeObserver.
   */
  private size(): { width: number; height: number } {
    if (!this.measured) {
      this.measured = { width: this.svg.clientWidth || 800, height: this.svg.clientHeight || 600 };
    }
    return this.measured;
  }

  private culling(): boolean {
    return this.items.length > CULL_THRESHOLD;
  }

  /** The graph-space rectangle to build: everything, or the viewport and a margin around it. */
  private wantedRegion(): { x0: number; y0: number; x1: number; y1: number } {
    if (!this.culling()) return { x0: -Infinity, y0: -Infinity, x1: Infinity, y1: Infinity };
    const { width, height } = this.size();
    const { tx, ty, k } = this.view;
    const w = width / k;
    const hgt = height / k;
    const x0 = -tx / k;
    const y0 = -ty / k;
    return { x0: x0 - w / 2, y0: y0 - hgt / 2, x1: x0 + w * 1.5, y1: y0 + hgt * 1.5 };
  }

  private render(): void {
    const doc = this.doc;
    const region = this.wantedRegion();
    const ctx = this.drawContext();
    this.region = region;
    const inRegion = (x: number, y: number, w: number, h: number): boolean =>
      x + w >= region.x0 && x <= region.x1 && y + h >= region.y0 && y <= region.y1;

    const groupFrag = doc.createDocumentFragment();
    for (const b of this.boxes) {
      if (!inRegion(b.x, b.y, b.w, b.h)) continue;
      groupFrag.appendChild(groupBoxElement(ctx, b));
    }
    this.groupLayer.replaceChildren(groupFrag);

    const parts: string[] = [];
    for (const [a, b] of this.edges) {
      const x0 = Math.min(a.x, b.x),
        y0 = Math.min(a.y, b.y);
      const x1 = Math.max(a.x + a.w, b.x + b.w),
        y1 = Math.max(a.y + a.h, b.y + b.h);
      if (!inRegion(x0, y0, x1 - x0, y1 - y0)) continue;
      parts.push(edgePathData(a, b));
    }
    this.edgePath.setAttribute("d", parts.join(""));

    const frag = doc.createDocumentFragment();
    const rendered = new Map<string, SVGElement>();
    for (const it of this.items) {
      if (!inRegion(it.x, it.y, it.w, it.h)) continue;
      const el = itemElement(ctx, it);
      rendered.set(it.key, el);
      frag.appendChild(el);
    }
    this.nodeLayer.replaceChildren(frag);
    this.rendered = rendered;
    this.drawSelectedEdges();
  }

  private drawContext(): DrawContext {
    return {
      doc: this.doc,
      diffClass: this.state?.diffClass ?? new Map<string, string>(),
      notes: this.notes,
      matches: this.matches,
      selected: this.selected,
      profile: this.state?.profile ?? null,
      groupNote: (g) => this.state?.groupNote?.(g) ?? null,
    };
  }

  private drawSelectedEdges(): void {
    const sel = this.selected === null ? undefined : this.repOf.get(this.selected);
    const parts: string[] = [];
    if (sel !== undefined) {
      for (const [a, b] of this.edges)
        if (a.key === sel || b.key === sel) parts.push(edgePathData(a, b));
    }
    this.selectedEdgePath.setAttribute("d", parts.join(""));
  }

  private applyView(): void {
    const { tx, ty, k } = this.view;
    this.viewport.setAttribute(
      "transform",
      `translate(${tx.toFixed(1)},${ty.toFixed(1)}) scale(${k.toFixed(4)})`,
    );
    this.svg.classList.toggle("lod-low", k < 0.4);
    const { width, height } = this.size();
    this.minimap.setViewport({ x: -tx / k, y: -ty / k, w: width / k, h: height / k });
    this.minimap.el.classList.toggle("tx-minimap-small", height < MINIMAP_MIN_PANE);
  }

  private onViewChanged(): void {
    this.applyView();
    if (!this.culling() || this.frame) return;
    this.frame = requestAnimationFrameSafe(() => {
      this.frame = 0;
      const have = this.region;
      const { width, height } = this.size();
      const { tx, ty, k } = this.view;
      const vx0 = -tx / k,
        vy0 = -ty / k,
        vx1 = vx0 + width / k,
        vy1 = vy0 + height / k;
      if (!have || vx0 < have.x0 || vy0 < have.y0 || vx1 > have.x1 || vy1 > have.y1) {
        this.render();
      }
    });
  }

  // -- input ----------------------------------------------------------------------------------

  private listen(): void {
    const svg = this.svg;
    let drag: { x: number; y: number; id: number; moved: boolean } | null = null;
    let suppressClick = false;

    const on = <K extends keyof SVGElementEventMap>(
      type: K,
      fn: (e: SVGElementEventMap[K]) => void,
      opts?: AddEventListenerOptions,
    ): void => {
      svg.addEventListener(type, fn as EventListener, opts);
      this.cleanups.push(() => svg.removeEventListener(type, fn as EventListener, opts));
    };

    on("pointerdown", (e) => {
      if (e.button !== 0) return;
      drag = { x: e.clientX, y: e.clientY, id: e.pointerId, moved: false };
    });
    on("pointermove", (e) => {
      if (!drag || e.pointerId !== drag.id) return;
      const dx = e.clientX - drag.x;
      const dy = e.clientY - drag.y;
      if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
      if (!drag.moved) {
        drag.moved = true;
        svg.classList.add("panning");
        try {
          svg.setPointerCapture(e.pointerId);
        } catch {
          /* synthetic events have no capturable pointer */
        }
      }
      drag.x = e.clientX;
      drag.y = e.clientY;
      this.panBy(dx, dy);
    });
    const end = (e: PointerEvent): void => {
      if (!drag || e.pointerId !== drag.id) return;
      suppressClick = drag.moved;
      drag = null;
      svg.classList.remove("panning");
    };
    on("pointerup", end);
    on("pointercancel", end);
    // The wheel scrolls the notebook, as over a map embedded in a page, until the graph is
    // engaged (clicked; a click elsewhere lets it go) or while Ctrl/Cmd is held (a trackpad's
    // pinch also comes as a wheel event with ctrlKey). A hint says how to zoom.
    const doc = this.doc;
    const release = (e: Event): void => {
      if (!svg.contains(e.target as Node | null)) this.setEngaged(false);
    };
    doc.addEventListener("pointerdown", release, true);
    this.cleanups.push(() => doc.removeEventListener("pointerdown", release, true));
    on("pointerdown", () => this.setEngaged(true));
    on(
      "wheel",
      (e) => {
        if (!this.engaged && !e.ctrlKey && !e.metaKey) {
          this.showWheelHint();
          return; // the page scrolls
        }
        e.preventDefault();
        const rect = svg.getBoundingClientRect();
        const step = Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015));
        this.zoomBy(
          Math.min(1.25, Math.max(0.8, step)),
          e.clientX - rect.left,
          e.clientY - rect.top,
        );
      },
      { passive: false },
    );
    on("click", (e) => {
      if (suppressClick) {
        suppressClick = false;
        return;
      }
      const target = e.target as Element | null;
      const toggle = target?.closest?.("[data-testid='group-toggle']");
      if (toggle) {
        const gid = toggle.getAttribute("data-group-id");
        if (gid !== null) this.callbacks.onToggleGroup(gid);
        return;
      }
      const node = target?.closest?.("[data-testid='node']");
      if (node) {
        this.callbacks.onSelect(node.getAttribute("data-node-id"));
        return;
      }
      const group = target?.closest?.("[data-testid='group'].collapsed");
      const gid = group?.getAttribute("data-group-id");
      if (gid) this.callbacks.onToggleGroup(gid);
    });
  }
}

function requestAnimationFrameSafe(fn: () => void): number {
  if (typeof requestAnimationFrame === "function") return requestAnimationFrame(fn);
  return setTimeout(fn, 16) as unknown as number;
}

function cancelAnimationFrameSafe(id: number): void {
  if (!id) return;
  if (typeof cancelAnimationFrame === "function") cancelAnimationFrame(id);
  else clearTimeout(id);
}
